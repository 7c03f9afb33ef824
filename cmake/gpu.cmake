# gpu.cmake - the optional GPU parts of the build, included at the end of the
# top-level CMakeLists.txt (after the library and test targets exist).
#
# OpenCL: TC_OPENCL (default ON when an OpenCL ICD loader and headers are
# found) compiles src/runtime/opencl.c against <CL/cl.h> and links the ICD
# loader (OpenCL::OpenCL) into libtinyc; without it the OPENCL device says
# "built without OpenCL support". CUDA needs nothing at build time: libcuda
# and libnvrtc are dlopen'ed by src/runtime/cuda.c.
#
# Tests (when TC_BUILD_TESTS): with OpenCL, the differential suite and the
# kernel-count tests run a second time with TC_DEVICE=OPENCL (label gpu),
# each with its own TC_CACHEDIR and POCL_CACHE_DIR; and the same suites run
# with TC_CUDA_CHECK=1, which also compiles every kernel for CUDA with NVRTC
# (skipped when NVRTC is not installed: the test prints "CUDA compile checks
# skipped" and ctest reports it as skipped).
find_package(OpenCL QUIET)
if(OpenCL_FOUND)
  option(TC_OPENCL "Build the OpenCL device (ICD loader)" ON)
else()
  option(TC_OPENCL "Build the OpenCL device (ICD loader)" OFF)
endif()
if(TC_OPENCL AND NOT OpenCL_FOUND)
  message(FATAL_ERROR "TC_OPENCL=ON but no OpenCL headers and ICD loader were found "
                      "(Debian: apt install ocl-icd-opencl-dev opencl-headers)")
endif()

if(TC_OPENCL)
  target_compile_definitions(tinyc_obj PRIVATE TC_HAVE_OPENCL)
  target_link_libraries(tinyc PRIVATE OpenCL::OpenCL)
  # the static library's users link the ICD loader too (installed: plain -lOpenCL)
  target_link_libraries(tinyc_static PUBLIC
    $<BUILD_INTERFACE:OpenCL::OpenCL> $<INSTALL_INTERFACE:OpenCL>)
endif()
message(STATUS "tinyc: OpenCL device ${TC_OPENCL}; CUDA device at run time (dlopen)")

if(TC_BUILD_TESTS)
  set(TC_GPU_SUITES diff_test_diff diff_test_int_dtypes diff_test_float64 diff_test_bfloat16
    schedule_test_schedule schedule_test_fusion schedule_test_index_copy)
  foreach(t ${TC_GPU_SUITES})
    if(NOT TARGET ${t})
      continue()
    endif()
    if(TC_OPENCL)
      add_test(NAME ${t}_opencl COMMAND ${t})
      set_tests_properties(${t}_opencl PROPERTIES LABELS gpu TIMEOUT 1500
        ENVIRONMENT "TC_DEVICE=OPENCL;TC_CACHEDIR=${CMAKE_BINARY_DIR}/kcache/${t}_opencl;POCL_CACHE_DIR=${CMAKE_BINARY_DIR}/pocl-cache/${t};${TC_TEST_ENV}")
    endif()
    add_test(NAME ${t}_cuda_compile COMMAND ${t})
    set_tests_properties(${t}_cuda_compile PROPERTIES LABELS gpu TIMEOUT 1500
      SKIP_REGULAR_EXPRESSION "CUDA compile checks skipped"
      ENVIRONMENT "TC_CUDA_CHECK=1;TC_CACHEDIR=${CMAKE_BINARY_DIR}/kcache/${t}_cuda;${TC_TEST_ENV}")
  endforeach()
  # the one on-device suite the sanitizer run of tools/test.sh includes
  # (with codegen_test_gpu and codegen_test_gpuvec): the others take
  # half an hour there
  if(TEST schedule_test_fusion_opencl)
    set_property(TEST schedule_test_fusion_opencl APPEND PROPERTY LABELS gpu-asan)
  endif()
endif()

# Every test may open an OpenCL device (the api tests try one): pocl's kernel
# cache goes into the build tree, and LeakSanitizer ignores what the driver
# itself never frees (tests/runtime/lsan-opencl.supp: pocl and LLVM only).
if(TC_BUILD_TESTS AND TC_OPENCL)
  get_property(tc_all_tests DIRECTORY ${CMAKE_SOURCE_DIR} PROPERTY TESTS)
  foreach(t ${tc_all_tests})
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT
      "LSAN_OPTIONS=suppressions=${CMAKE_SOURCE_DIR}/tests/runtime/lsan-opencl.supp:print_suppressions=0")
    get_test_property(${t} ENVIRONMENT tc_env)
    if(NOT tc_env MATCHES "POCL_CACHE_DIR")
      set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT
        "POCL_CACHE_DIR=${CMAKE_BINARY_DIR}/pocl-cache/${t}")
    endif()
  endforeach()
endif()

# libtinyc.a users that link through pkg-config --static need the ICD loader
# too: add -lOpenCL to the Libs.private of the tinyc.pc that install.cmake
# generated (a stopgap until tinyc.pc.in carries a placeholder for it)
if(TC_OPENCL AND TC_INSTALL AND EXISTS ${CMAKE_BINARY_DIR}/tinyc.pc)
  file(READ ${CMAKE_BINARY_DIR}/tinyc.pc tc_pc)
  if(NOT tc_pc MATCHES "-lOpenCL")
    string(REPLACE "Libs.private:" "Libs.private: -lOpenCL" tc_pc "${tc_pc}")
    file(WRITE ${CMAKE_BINARY_DIR}/tinyc.pc "${tc_pc}")
  endif()
endif()

# The mock CUDA driver (tests/runtime/mock_cuda.c, test-only, never installed):
# a strict stand-in for libcuda that runtime_test_cuda_mock loads through
# TC_CUDA_LIB, so cuda.c's device, memory, module and launch code runs and is
# checked on machines without a GPU. It carries its own copy of the few driver
# types it needs; where cuda.h is found it includes that instead, so the
# compiler checks its entry points against the real prototypes.
if(TC_BUILD_TESTS)
  find_path(TC_CUDA_INCLUDE_DIR cuda.h HINTS ENV CUDA_HOME ENV CUDA_PATH
    PATHS /usr/local/cuda PATH_SUFFIXES include)
  add_library(tc_mock_cuda SHARED ${CMAKE_SOURCE_DIR}/tests/runtime/mock_cuda.c
    ${CMAKE_SOURCE_DIR}/tests/runtime/mock_cuda_ptx_decode.c
    ${CMAKE_SOURCE_DIR}/tests/runtime/mock_cuda_ptx_run.c)
  target_compile_options(tc_mock_cuda PRIVATE ${TC_WARNINGS} -fvisibility=hidden)
  target_link_libraries(tc_mock_cuda PRIVATE Threads::Threads m)
  if(TC_CUDA_INCLUDE_DIR)
    target_compile_definitions(tc_mock_cuda PRIVATE MOCK_HAVE_CUDA_H)
    target_include_directories(tc_mock_cuda PRIVATE ${TC_CUDA_INCLUDE_DIR})
  endif()
  if(TARGET runtime_test_cuda_mock)
    add_dependencies(runtime_test_cuda_mock tc_mock_cuda)
    target_compile_definitions(runtime_test_cuda_mock PRIVATE
      TC_MOCK_CUDA_LIB="$<TARGET_FILE:tc_mock_cuda>")
    set_tests_properties(runtime_test_cuda_mock PROPERTIES SKIP_REGULAR_EXPRESSION "no NVRTC: ")
  endif()
  # the differential suite and the kernel-count tests with TC_DEVICE=CUDA on
  # the mock: NVRTC compiles every kernel, the mock's PTX interpreter runs it,
  # and the results must match the reference evaluator as on any device
  # (skipped where NVRTC is not installed: `runtime_test_cuda_mock --need-nvrtc`
  # says so first)
  foreach(t ${TC_GPU_SUITES})
    if(NOT TARGET ${t})
      continue()
    endif()
    add_dependencies(${t} tc_mock_cuda)
    add_test(NAME ${t}_cuda_mock COMMAND sh -c "\"$1\" --need-nvrtc && exec \"$2\"" sh
      $<TARGET_FILE:runtime_test_cuda_mock> $<TARGET_FILE:${t}>)
    set_tests_properties(${t}_cuda_mock PROPERTIES LABELS cuda_mock TIMEOUT 900
      SKIP_REGULAR_EXPRESSION "NVRTC is not available"
      ENVIRONMENT "TC_DEVICE=CUDA;TC_CUDA_LIB=$<TARGET_FILE:tc_mock_cuda>;TC_CACHEDIR=${CMAKE_BINARY_DIR}/kcache/${t}_cuda_mock;${TC_TEST_ENV}")
  endforeach()
endif()
