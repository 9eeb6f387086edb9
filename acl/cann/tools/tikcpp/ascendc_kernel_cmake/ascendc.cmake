# CANN's ascendc.cmake, on npusim: see acl/cann/npusim-ascendc.cmake.
include("${CMAKE_CURRENT_LIST_DIR}/../../../npusim-ascendc.cmake")
