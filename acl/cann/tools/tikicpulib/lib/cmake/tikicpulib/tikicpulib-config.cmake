# CANN's tikicpulib package (the CPU twin-debug library), on npusim.
#
# find_package(tikicpulib) defines tikicpulib::<SoC> for SOC_VERSION and CANN's SoC names: it
# carries the twin-debug macros (ASCENDC_CPU_DEBUG, __CCE_KT_TEST__) and tikicpulib.h. A target
# that links it and lists kernel files among its sources (`add_library(kernels SHARED
# add_custom.cpp)`, as samples' cpu_lib.cmake does) gets, at the end of configuration, each
# kernel file compiled for npusim's AI core by `npusim-ascendc.sh --cpu-debug` in place of a
# host compile, and the generated host definitions ICPU_RUN_KF calls. The kernels run on the
# simulated NPU.
include("${CMAKE_CURRENT_LIST_DIR}/../../../../../npusim-ascendc.cmake")
set(tikicpulib_FOUND TRUE)

set(_npusim_socs Ascend910B1 Ascend910B2 Ascend910B2C Ascend910B3 Ascend910B4 Ascend910B4-1
    Ascend910_9391 Ascend910_9392 Ascend910_9381 Ascend910_9382 Ascend910_9372 Ascend910_9362
    Ascend310P1 Ascend310P3 Ascend310B1 Ascend910A Ascend910ProB Ascend910)
if(DEFINED SOC_VERSION)
    list(APPEND _npusim_socs "${SOC_VERSION}")
endif()
list(REMOVE_DUPLICATES _npusim_socs)
foreach(soc IN LISTS _npusim_socs)
    if(NOT TARGET tikicpulib::${soc})
        add_library(tikicpulib::${soc} INTERFACE IMPORTED GLOBAL)
        set_target_properties(tikicpulib::${soc} PROPERTIES
            INTERFACE_COMPILE_DEFINITIONS "ASCENDC_CPU_DEBUG;__CCE_KT_TEST__"
            INTERFACE_LINK_LIBRARIES npusim_acl)
    endif()
endforeach()

# The targets of DIR and its subdirectories.
function(_npusim_targets dir out)
    get_property(ts DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
    get_property(subs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
    foreach(s IN LISTS subs)
        _npusim_targets("${s}" more)
        list(APPEND ts ${more})
    endforeach()
    set(${out} ${ts} PARENT_SCOPE)
endfunction()

# End of configuration: the kernel files of every target linking tikicpulib::* go to the AI core.
function(_npusim_tikicpulib_kernels)
    _npusim_targets("${CMAKE_SOURCE_DIR}" targets)
    foreach(t IN LISTS targets)
        get_target_property(libs ${t} LINK_LIBRARIES)
        if(NOT libs MATCHES "tikicpulib::")
            continue()
        endif()
        get_target_property(srcs ${t} SOURCES)
        get_target_property(srcdir ${t} SOURCE_DIR)
        set(n 0)
        foreach(src IN LISTS srcs)
            get_filename_component(abs "${src}" ABSOLUTE BASE_DIR "${srcdir}")
            if(NOT abs MATCHES "\\.(cpp|cc|cxx)$" OR NOT EXISTS "${abs}")
                continue()
            endif()
            file(READ "${abs}" text)
            if(NOT text MATCHES "__global__[ \t\r\n]+__aicore__[^;{]*\\)[ \t\r\n]*{")
                continue()
            endif()
            get_filename_component(stem "${abs}" NAME_WE)
            set(outdir "${CMAKE_BINARY_DIR}/${t}_npusim/${stem}")
            _npusim_ascendc_command(${t} "--cpu-debug" "${abs}" "${outdir}" code)
            set_source_files_properties("${abs}" TARGET_DIRECTORY ${t} PROPERTIES HEADER_FILE_ONLY ON)
            target_sources(${t} PRIVATE "${code}")
            target_include_directories(${t} PUBLIC "${outdir}")
            math(EXPR n "${n} + 1")
        endforeach()
        if(n GREATER 0)
            set_target_properties(${t} PROPERTIES POSITION_INDEPENDENT_CODE ON)
        endif()
    endforeach()
endfunction()
if(NOT _npusim_tikicpulib_deferred)
    set(_npusim_tikicpulib_deferred TRUE)
    cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _npusim_tikicpulib_kernels)
endif()
