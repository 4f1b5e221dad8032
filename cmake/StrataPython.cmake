# Finds Debian's Python (/usr/bin/python3, the interpreter whose packages the tests use, not
# another one first on PATH) with its headers, and Debian's pybind11, for the Python module
# (STRATA_HAVE_PYTHON). STRATA_PYTHON=AUTO builds it when both are there, ON requires them, OFF
# skips it (the sanitize preset: a module built with ASan cannot be loaded by a plain python3).
# The module links the planning libraries, so they are compiled position-independent.
set(STRATA_HAVE_PYTHON OFF)
if(NOT STRATA_PYTHON MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "STRATA_PYTHON must be AUTO, ON or OFF, not '${STRATA_PYTHON}'")
endif()
if(NOT STRATA_PYTHON STREQUAL "OFF")
  if(NOT Python_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python_EXECUTABLE /usr/bin/python3)
  endif()
  set(PYBIND11_FINDPYTHON ON)
  find_package(Python 3.9 QUIET COMPONENTS Interpreter Development.Module)
  find_package(pybind11 2.6 QUIET CONFIG)
  if(Python_FOUND AND pybind11_FOUND)
    set(STRATA_HAVE_PYTHON ON)
    set(CMAKE_POSITION_INDEPENDENT_CODE ON)
    message(STATUS "Strata: Python module for ${Python_EXECUTABLE} (pybind11 ${pybind11_VERSION})")
  elseif(STRATA_PYTHON STREQUAL "ON")
    message(FATAL_ERROR "STRATA_PYTHON=ON but pybind11 or Python's headers were not found "
                        "(./setup.sh installs pybind11-dev and python3-dev)")
  else()
    message(STATUS "Strata: no Python module (pybind11-dev or python3-dev missing)")
  endif()
endif()
