# prism_add_library(NAME SOURCES... DEPS ...): one library target per src/ folder,
# aliased as prism::NAME, with src/ on the include path so headers read
# "graph/graph.h".
function(prism_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(prism_${name} STATIC ${ARG_SOURCES})
  add_library(prism::${name} ALIAS prism_${name})
  target_include_directories(prism_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src
                                                  ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(prism_${name} PUBLIC ${ARG_DEPS})
  target_compile_options(prism_${name} PRIVATE -Wall -Wextra -Wpedantic)
endfunction()

# prism_add_test(NAME SOURCES... DEPS ...): one GoogleTest executable registered
# with ctest, test cases discovered individually.
function(prism_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  target_compile_options(${name} PRIVATE -Wall -Wextra)
  target_compile_definitions(${name} PRIVATE PRISM_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                                             PRISM_BINARY_DIR="${PROJECT_BINARY_DIR}")
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60)
endfunction()
