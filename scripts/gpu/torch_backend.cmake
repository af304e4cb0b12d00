# The c10d extension prism_torch/_c10d<ext>.so built on the GPU host, from the
# bundle alone, against the host's torch (copied into the bundle as
# torch_backend/CMakeLists.txt by scripts/gpu/bundle.sh; build_torch_backend.sh
# runs it). The same sources and flags as src/shim/torch/CMakeLists.txt, with
# torch found the way torch.utils.cpp_extension finds it (PYTHON's site-packages),
# asio and fmt from third_party/ (fmt header-only, so no libfmt to link).
cmake_minimum_required(VERSION 3.20)
project(prism_torch_backend LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release)
endif()
set(PYTHON python3 CACHE FILEPATH "The interpreter whose torch the backend is for")
execute_process(
  COMMAND ${PYTHON} -c "import os, sysconfig, torch; print(os.path.dirname(torch.__file__)); print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); print(sysconfig.get_paths()['include']); print(sysconfig.get_config_var('EXT_SUFFIX')); print(torch.__version__)"
  OUTPUT_VARIABLE _py RESULT_VARIABLE _rc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "'${PYTHON} -c \"import torch\"' fails: no torch to build against")
endif()
string(REPLACE "\n" ";" _py "${_py}")
list(GET _py 0 TORCH_DIR)
list(GET _py 1 TORCH_ABI)
list(GET _py 2 PY_INCLUDE)
list(GET _py 3 PY_SUFFIX)
list(GET _py 4 TORCH_VERSION)
foreach(_f ${TORCH_DIR}/include/torch/csrc/distributed/c10d/Backend.hpp ${PY_INCLUDE}/Python.h)
  if(NOT EXISTS ${_f})
    message(FATAL_ERROR "missing ${_f}")
  endif()
endforeach()
message(STATUS "prism torch backend: torch ${TORCH_VERSION} at ${TORCH_DIR}")
find_package(Threads REQUIRED)

add_compile_definitions(FMT_HEADER_ONLY ASIO_NO_DEPRECATED _GLIBCXX_USE_CXX11_ABI=${TORCH_ABI})
include_directories(${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
include_directories(SYSTEM ${CMAKE_SOURCE_DIR}/third_party)

file(GLOB _util src/util/*.cc)
file(GLOB _wire src/wire/*.cc)
add_library(prism_client_static STATIC ${_util} ${_wire} src/client/client.cc
            src/client/c_status.cc src/client/c_api.cc src/shim/torch/session.cc)
target_link_libraries(prism_client_static PUBLIC Threads::Threads)
set_target_properties(prism_client_static PROPERTIES CXX_VISIBILITY_PRESET hidden
                      VISIBILITY_INLINES_HIDDEN ON)

add_library(prism_torch_c10d MODULE src/shim/torch/backend.cc src/shim/torch/op_mapping.cc
            src/shim/torch/work.cc src/shim/torch/module.cc)
target_include_directories(prism_torch_c10d SYSTEM PRIVATE ${PY_INCLUDE} ${TORCH_DIR}/include
                           ${TORCH_DIR}/include/torch/csrc/api/include)
target_link_libraries(prism_torch_c10d PRIVATE prism_client_static ${TORCH_DIR}/lib/libtorch.so
                      ${TORCH_DIR}/lib/libtorch_cpu.so ${TORCH_DIR}/lib/libc10.so
                      ${TORCH_DIR}/lib/libtorch_python.so)
target_link_options(prism_torch_c10d PRIVATE -Wl,--exclude-libs,ALL)
set_target_properties(prism_torch_c10d PROPERTIES OUTPUT_NAME _c10d PREFIX "" SUFFIX "${PY_SUFFIX}"
                      CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
