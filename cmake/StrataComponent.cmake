# strata_component(NAME [SOURCES ...] [DEPENDS ...]): one component folder = one library target
# `strata_<NAME>` (alias strata::<NAME>) whose public headers live in <folder>/include/strata/<NAME>/.
# A component with no sources yet is an INTERFACE target, so the layering is declared before the
# code that fills it arrives.
function(strata_component name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPENDS" ${ARGN})
  set(target strata_${name})
  if(ARG_SOURCES)
    add_library(${target} STATIC ${ARG_SOURCES})
    target_include_directories(${target} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include
                                         PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
    target_link_libraries(${target} PUBLIC ${ARG_DEPENDS})
  else()
    add_library(${target} INTERFACE)
    target_link_libraries(${target} INTERFACE ${ARG_DEPENDS})
  endif()
  add_library(strata::${name} ALIAS ${target})
endfunction()
