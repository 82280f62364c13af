# Helpers shared by every layer: one creates every GoogleTest test, one every Google Benchmark binary.
include(GoogleTest)

# Precompiled headers: the third-party headers most translation units parse (GoogleTest, the JSON,
# YAML and format libraries, SystemC), compiled once per layer and once for all test binaries
# instead of once per file. -Winvalid-pch makes a header GCC had to parse after all a warning. Off
# in the libFuzzer build (clang), in the -O0 sanitizer build (GCC 12 then rejects Eigen's
# _mm_prefetch in every file that starts from a precompiled header: "second argument to
# '__builtin_prefetch' must be a constant") and with -DPROBELAB_PCH=OFF; README, "Build time".
option(PROBELAB_PCH "Precompile the third-party headers of each layer and of the tests" ON)
if(PROBELAB_FUZZ OR (PROBELAB_SANITIZE AND PROBELAB_SANITIZE_OPT STREQUAL "-O0"))
  set(PROBELAB_PCH OFF)
endif()
# Test binaries compile at -O1 in the optimised builds (the sanitizer build sets its own level):
# the code they test is in the libraries (-O3); their own code is assertions and fixtures, and a
# test rebuild takes a sixth less time (README, "Build time").
set(probelab_test_opt)
if(NOT PROBELAB_SANITIZE)
  set(probelab_test_opt $<$<CONFIG:Release,RelWithDebInfo>:-O1>)
endif()
set(PROBELAB_TEST_PCH <gtest/gtest.h> <gmock/gmock.h> <fmt/format.h> <nlohmann/json.hpp> <yaml-cpp/yaml.h>)

# probelab_precompile(<target> <headers...>): precompiles <headers> for <target> when PROBELAB_PCH.
function(probelab_precompile target)
  if(PROBELAB_PCH)
    target_precompile_headers(${target} PRIVATE ${ARGN})
    target_compile_options(${target} PRIVATE -Winvalid-pch)
  endif()
endfunction()

set(PROBELAB_TEST_ENV "SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1;PROBELAB_SOURCE_DIR=${PROJECT_SOURCE_DIR}")

# probelab_add_test(<name> SOURCES <src...> LIBS <targets...> [TIMEOUT <s>])
# Builds one GoogleTest binary; every TEST becomes its own CTest entry run in its own process,
# so a test may elaborate its own SystemC design.
function(probelab_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LIBS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  # Our own main() is linked into the binary (as an object, compiled once for all tests) so that
  # SystemC's library main() never wins.
  if(NOT TARGET probelab_test_main)
    add_library(probelab_test_main OBJECT ${PROJECT_SOURCE_DIR}/tests/support/test_main.cpp)
    target_link_libraries(probelab_test_main PRIVATE GTest::gtest)
  endif()
  add_executable(${name} ${ARG_SOURCES} $<TARGET_OBJECTS:probelab_test_main>)
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gmock Threads::Threads probelab_allocator)
  target_compile_options(${name} PRIVATE ${probelab_test_opt})
  if(PROBELAB_PCH)
    # One precompiled header for every test binary, owned by an executable that is never run
    # (the same -fPIE as the tests; GCC rejects a header compiled with other code-model flags).
    if(NOT TARGET probelab_test_pch)
      add_executable(probelab_test_pch ${PROJECT_SOURCE_DIR}/tests/support/pch_owner.cpp)
      target_link_libraries(probelab_test_pch PRIVATE GTest::gtest GTest::gmock fmt::fmt nlohmann_json::nlohmann_json yaml-cpp)
      target_precompile_headers(probelab_test_pch PRIVATE ${PROBELAB_TEST_PCH})
      target_compile_options(probelab_test_pch PRIVATE ${probelab_test_opt})
    endif()
    target_precompile_headers(${name} REUSE_FROM probelab_test_pch)
    target_link_libraries(${name} PRIVATE fmt::fmt nlohmann_json::nlohmann_json yaml-cpp)
    target_compile_options(${name} PRIVATE -Winvalid-pch)
  endif()
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_definitions(${name} PRIVATE PROBELAB_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  # TEST_PREFIX: CTest names start with the binary name (e.g. numerics_test_gemm.Gemm.X), so that
  # `ctest -R <layer>` selects the tests of one layer.
  gtest_discover_tests(${name}
    TEST_PREFIX "${name}."
    DISCOVERY_TIMEOUT 60
    PROPERTIES ENVIRONMENT "${PROBELAB_TEST_ENV}" TIMEOUT ${ARG_TIMEOUT}
    DISCOVERY_MODE PRE_TEST)
endfunction()

# probelab_add_test_dir(<prefix> [CLI] LIBS <targets...>): one test binary per tests/<dir>/test_*.cpp.
# CLI: the tests run the built `probelab` executable (PROBELAB_BINARY names it).
function(probelab_add_test_dir prefix)
  cmake_parse_arguments(ARG "CLI" "TIMEOUT" "LIBS;EXTRA_SOURCES" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/test_*.cpp)
  foreach(src IN LISTS srcs)
    get_filename_component(stem ${src} NAME_WE)
    set(args SOURCES ${src} ${ARG_EXTRA_SOURCES} LIBS ${ARG_LIBS})
    if(ARG_TIMEOUT)
      list(APPEND args TIMEOUT ${ARG_TIMEOUT})
    endif()
    probelab_add_test(${prefix}_${stem} ${args})
    if(ARG_CLI)
      add_dependencies(${prefix}_${stem} probelab)
      target_compile_definitions(${prefix}_${stem} PRIVATE PROBELAB_BINARY="$<TARGET_FILE:probelab>")
    endif()
  endforeach()
endfunction()

# probelab_add_bench(<name> SOURCES <src...> LIBS <targets...>)
function(probelab_add_bench name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES} ${PROJECT_SOURCE_DIR}/bench/support/bench_main.cpp)
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} benchmark::benchmark Threads::Threads probelab_allocator)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bench)
endfunction()

# probelab_layer(<target> [SYSTEMC] DEPS <targets...> [PCH <headers...>]): a library of every .cpp
# in the calling directory (not recursive). SYSTEMC marks a layer whose translation units include
# SystemC headers; PCH lists the third-party headers to precompile for it (PROBELAB_PCH).
function(probelab_layer target)
  cmake_parse_arguments(ARG "SYSTEMC" "" "DEPS;PRIVATE_DEPS;GLOB;PCH" ${ARGN})
  if(NOT ARG_GLOB)
    set(ARG_GLOB *.cpp)
  endif()
  set(srcs)
  foreach(g IN LISTS ARG_GLOB)
    file(GLOB more CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${g})
    list(APPEND srcs ${more})
  endforeach()
  if(NOT srcs)
    # A layer without sources yet still gets a library so that its dependents configure.
    set(empty ${CMAKE_CURRENT_BINARY_DIR}/${target}_empty.cpp)
    file(WRITE ${empty} "// no sources yet\n")
    set(srcs ${empty})
  endif()
  add_library(${target} STATIC ${srcs})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${target} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  if(ARG_SYSTEMC)
    # Debian's SystemC was built as C++17; its API-version symbol must match (see NOTES).
    target_compile_definitions(${target} PUBLIC SC_CPLUSPLUS=201703L SC_INCLUDE_DYNAMIC_PROCESSES)
    target_link_libraries(${target} PUBLIC PkgConfig::SYSTEMC probelab_sc_main_stub)
  endif()
  if(ARG_PCH)
    probelab_precompile(${target} ${ARG_PCH})
  endif()
endfunction()

# Collect the transitive link closure of a target.
function(_probelab_link_closure target out)
  set(seen)
  set(todo ${target})
  while(todo)
    list(POP_FRONT todo t)
    if(t IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${t})
    if(TARGET ${t})
      get_target_property(l1 ${t} LINK_LIBRARIES)
      get_target_property(l2 ${t} INTERFACE_LINK_LIBRARIES)
      foreach(l IN LISTS l1 l2)
        if(l AND NOT l MATCHES "-NOTFOUND$")
          string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" l "${l}")
          list(APPEND todo ${l})
        endif()
      endforeach()
    endif()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

# probelab_forbid_link(<target> <forbidden>): configure fails if <target> reaches <forbidden>.
function(probelab_forbid_link target forbidden)
  _probelab_link_closure(${target} closure)
  if(forbidden IN_LIST closure)
    message(FATAL_ERROR "Layering violation: ${target} links ${forbidden} (see DESIGN.md, one-way dependency rule)")
  endif()
  get_target_property(defs ${target} INTERFACE_COMPILE_DEFINITIONS)
  if(defs AND "SC_CPLUSPLUS=201703L" IN_LIST defs)
    message(FATAL_ERROR "Layering violation: ${target} exports SystemC compile definitions")
  endif()
endfunction()
