// Runs every case directory under the given root through onnxruntime (npm onnxruntime-node) and
// writes <case>/outputs.json from <case>/inputs.json (see scripts/gen_recurrent_cases.py).
//   node scripts/ort_outputs.mjs tests/graph/data/recurrent_cases
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';

const root = process.argv[2];
for (const name of fs.readdirSync(root).sort()) {
  const dir = path.join(root, name);
  if (!fs.existsSync(path.join(dir, 'inputs.json'))) continue;
  const spec = JSON.parse(fs.readFileSync(path.join(dir, 'inputs.json'), 'utf8'));
  const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'));
  const feeds = {};
  for (const t of spec.inputs) {
    const data = t.dtype === 'int32' ? Int32Array.from(t.data) : Float32Array.from(t.data);
    feeds[t.name] = new ort.Tensor(t.dtype, data, t.dims);
  }
  const res = await session.run(feeds);
  const out = {};
  for (const o of spec.outputs) out[o] = {dims: res[o].dims, data: Array.from(res[o].data)};
  fs.writeFileSync(path.join(dir, 'outputs.json'), JSON.stringify(out));
  console.log(`${name}: ${spec.outputs.map((o) => `${o} [${res[o].dims}]`).join(', ')}`);
}
