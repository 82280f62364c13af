# Sanitizer runtime options of scripts/test.sh --sanitize and scripts/fuzz.sh (sourced).
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# halt_on_error: a finding fails the test. detect_stack_use_after_return stays off: SystemC runs
# every SC_THREAD on a coroutine stack it allocates itself, which ASan's fake stacks cannot follow.
export ASAN_OPTIONS="suppressions=$dir/asan.supp:halt_on_error=1:abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=0:strict_string_checks=1:check_initialization_order=1"
export LSAN_OPTIONS="suppressions=$dir/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$dir/ubsan.supp"
# Open MPI unloads its components at MPI_Finalize, before the leak check: their allocations would
# show as "<unknown module>" and escape the suppressions by library name in lsan.supp.
export OMPI_MCA_mca_base_component_disable_dlclose=1
