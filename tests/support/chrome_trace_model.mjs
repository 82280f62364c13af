// Loads Chrome trace JSON files in Chrome DevTools' own trace model (npm @paulirish/trace_engine)
// and prints, per file, one JSON line: the X slices in the file, how many the model kept in its
// per-thread trees (data.Renderer.entryToNode), and the flows it bound (data.Flows).
// Usage: node chrome_trace_model.mjs <dir holding node_modules/@paulirish/trace_engine> FILE...
import fs from 'node:fs';
import path from 'node:path';
import {pathToFileURL} from 'node:url';

const [dir, ...files] = process.argv.slice(2);
const pkg = path.join(dir, 'node_modules', '@paulirish', 'trace_engine');
const Trace = await import(pathToFileURL(path.join(pkg, 'models', 'trace', 'trace.js')).href);
const {polyfillDOMRect} = await import(pathToFileURL(path.join(pkg, 'analyze-trace.mjs')).href);
polyfillDOMRect();

for (const file of files) {
  const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
  const events = doc.traceEvents ?? doc;
  const model = Trace.TraceModel.Model.createWithAllHandlers();
  await model.parse(events);
  const data = model.parsedTrace().data;
  let kept = 0;
  for (const [, proc] of data.Renderer.processes)
    for (const [, thread] of proc.threads)
      for (const e of thread.entries)
        if (e.ph === 'X' && data.Renderer.entryToNode.has(e)) ++kept;
  const slices = events.filter(e => e.ph === 'X').length;
  const flows = data.Flows.flows.map(f => f.length);
  console.log(JSON.stringify({file, slices, kept, dropped: slices - kept, flows}));
}
