# Warnings (as errors) and sanitizers travel through INTERFACE targets that
# every strata target links privately; consumers of the installed package
# never inherit them.
add_library(strata_warnings INTERFACE)
add_library(strata::warnings ALIAS strata_warnings)
target_compile_options(strata_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
  -Wcast-align -Wunused -Woverloaded-virtual -Wnull-dereference
  -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough)
if(STRATA_WERROR)
  target_compile_options(strata_warnings INTERFACE -Werror)
endif()

add_library(strata_sanitize INTERFACE)
add_library(strata::sanitize ALIAS strata_sanitize)
if(STRATA_SANITIZE)
  string(REPLACE "," ";" _san_list "${STRATA_SANITIZE}")
  foreach(_s IN LISTS _san_list)
    if(NOT _s MATCHES "^(address|undefined|thread|leak)$")
      message(FATAL_ERROR "STRATA_SANITIZE: unknown sanitizer '${_s}' (use address,undefined or thread)")
    endif()
  endforeach()
  if("thread" IN_LIST _san_list AND "address" IN_LIST _san_list)
    message(FATAL_ERROR "STRATA_SANITIZE: thread and address cannot be combined")
  endif()
  set(_flags -fsanitize=${STRATA_SANITIZE} -fno-omit-frame-pointer)
  if("undefined" IN_LIST _san_list)
    list(APPEND _flags -fno-sanitize-recover=undefined)
  endif()
  # GCC warns (-Wtsan) that TSan does not model std::atomic_thread_fence; the
  # fast path's Dekker pairs (sleeper word / sequence word) need the fences,
  # so the warning must not fail a -Werror build.
  if("thread" IN_LIST _san_list AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    list(APPEND _flags -Wno-tsan)
  endif()
  # Sanitizer flags must reach every object, including third-party headers
  # instantiated in our code, so they are global, not per target.
  add_compile_options(${_flags})
  add_link_options(${_flags})
  message(STATUS "strata: sanitizers ${STRATA_SANITIZE}")
endif()

# strata_module(<name> SOURCES ... DEPS ...): one static library per layer,
# aliased as strata::<name>, with its public headers in <dir>/include.
function(strata_module name)
  cmake_parse_arguments(M "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(strata_${name} ${M_SOURCES})
  add_library(strata::${name} ALIAS strata_${name})
  set_target_properties(strata_${name} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME strata_${name})
  target_include_directories(strata_${name}
    PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(strata_${name} PUBLIC ${M_PUBLIC_DEPS}
    PRIVATE ${M_PRIVATE_DEPS} $<BUILD_INTERFACE:strata::warnings>)
  target_compile_features(strata_${name} PUBLIC cxx_std_17)
  install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  set_property(GLOBAL APPEND PROPERTY STRATA_EXPORTED_TARGETS strata_${name})
endfunction()

# strata_executable(<name> SOURCES ... DEPS ...): binaries land in build/bin.
function(strata_executable name)
  cmake_parse_arguments(E "INSTALL" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${E_SOURCES})
  target_link_libraries(${name} PRIVATE ${E_DEPS} strata::warnings)
  if(E_INSTALL)
    install(TARGETS ${name} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endfunction()
