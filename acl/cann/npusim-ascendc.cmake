# npusim-ascendc.cmake — CANN's Ascend C CMake interface on npusim.
#
# A kernel-launch sample's CMakeLists builds unchanged when it is configured with npusim as its
# CANN package:
#
#     cmake -B build -DASCEND_CANN_PACKAGE_PATH=<npusim>/acl/cann -DRUN_MODE=npu|cpu ...
#
# (acl/cann is laid out as CANN's package: tools/tikcpp/ascendc_kernel_cmake/ascendc.cmake and
# compiler/tikcpp/... include this file; tools/tikicpulib/lib/cmake is the twin-debug
# library's package.) Or include this file from a CMakeLists directly.
#
# Offers:
#   ascendc_library(NAME STATIC|SHARED KERNEL.cpp...)   the kernels compiled for npusim's AI core
#       by scripts/npusim-ascendc.sh, and a host library of their launchers
#       (ACLRT_LAUNCH_KERNEL, the <<<>>> wrappers) that links libnpusim_acl
#   ascendc_compile_definitions(NAME PRIVATE|PUBLIC defs...)   -D for the kernel compile
#   ascendc_include_directories(NAME PRIVATE|PUBLIC dirs...)   -I for the kernel compile
#   ascendc_compile_options(NAME PRIVATE|PUBLIC opts...)       flags npusim-ascendc.sh takes
#   (the target's own include directories and compile definitions reach the kernel compile too)
#   the host targets samples link: host_intf_pub, ascendcl (libnpusim_acl and acl/include),
#   tiling_api, register, platform, ascendalog, c_sec, runtime, dfx_flags, graph_base (nothing
#   to add)
#   and, through find_package(tikicpulib), the twin-debug build (RUN_MODE=cpu; see
#   tools/tikicpulib/lib/cmake/tikicpulib/tikicpulib-config.cmake).
#
# NPUSIM_ACL_LIBRARY_DIR (cache) is where libnpusim_acl.so is: target/release by default,
# built by `cargo build --release -p npusim-acl`.
if(CMAKE_VERSION VERSION_LESS 3.19)
    message(FATAL_ERROR "npusim-ascendc.cmake needs CMake 3.19 or newer")
endif()
if(DEFINED NPUSIM_ASCENDC_CMAKE_INCLUDED)
    return()
endif()
set(NPUSIM_ASCENDC_CMAKE_INCLUDED TRUE)

get_filename_component(NPUSIM_ROOT "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
set(NPUSIM_ACL_LIBRARY_DIR "${NPUSIM_ROOT}/target/release" CACHE PATH
    "the directory holding libnpusim_acl.so")
if(NOT EXISTS "${NPUSIM_ACL_LIBRARY_DIR}/libnpusim_acl.so")
    message(FATAL_ERROR "npusim: ${NPUSIM_ACL_LIBRARY_DIR}/libnpusim_acl.so not found: build it "
        "with `cargo build --release -p npusim-acl` in ${NPUSIM_ROOT}, or set NPUSIM_ACL_LIBRARY_DIR")
endif()
file(GLOB NPUSIM_ASCENDC_SDK_HEADERS "${NPUSIM_ROOT}/device/sdk/*.h" "${NPUSIM_ROOT}/device/sdk/ascendc/*.h"
    "${NPUSIM_ROOT}/device/sdk/ascendc/std/*")

if(NOT TARGET npusim_acl)
    add_library(npusim_acl SHARED IMPORTED GLOBAL)
    set_target_properties(npusim_acl PROPERTIES
        IMPORTED_LOCATION "${NPUSIM_ACL_LIBRARY_DIR}/libnpusim_acl.so"
        INTERFACE_INCLUDE_DIRECTORIES "${NPUSIM_ROOT}/acl/include")
    foreach(t host_intf_pub ascendcl)
        add_library(${t} INTERFACE IMPORTED GLOBAL)
        set_target_properties(${t} PROPERTIES INTERFACE_LINK_LIBRARIES npusim_acl)
    endforeach()
    # CANN's other host libraries: their parts npusim offers are in libnpusim_acl and its headers.
    foreach(t tiling_api register platform ascendalog c_sec runtime dfx_flags graph_base)
        add_library(${t} INTERFACE IMPORTED GLOBAL)
        set_target_properties(${t} PROPERTIES INTERFACE_LINK_LIBRARIES npusim_acl)
    endforeach()
endif()

# The AI-core architecture of a SoC, as CANN's compile takes it (the macros differ; the simulated
# device is the preset chosen when the program runs).
function(_npusim_soc_arch soc out)
    if(soc MATCHES "^Ascend310P")
        set(${out} "--cce-aicore-arch=dav-m200" PARENT_SCOPE)
    elseif(soc MATCHES "^Ascend310B")
        set(${out} "--cce-aicore-arch=dav-m300" PARENT_SCOPE)
    elseif(soc MATCHES "^Ascend910(A|ProA|ProB|PremiumA)?$")
        set(${out} "--cce-aicore-arch=dav-c100" PARENT_SCOPE)
    else()
        set(${out} "" PARENT_SCOPE) # Ascend910B / 910_93: dav-c220-vec, the default
    endif()
endfunction()

# Adds the custom command that runs npusim-ascendc.sh [MODE] on KERNEL for TARGET (whose
# NPUSIM_ASCENDC_OPTIONS, INCLUDE_DIRECTORIES and COMPILE_DEFINITIONS reach the compile) into
# OUTDIR; sets GEN to the generated launch code.
function(_npusim_ascendc_command target mode kernel outdir gen)
    get_filename_component(stem "${kernel}" NAME_WE)
    set(code "${outdir}/aclrtlaunch_${stem}.cpp")
    _npusim_soc_arch("${SOC_VERSION}" arch)
    set(opts "$<TARGET_GENEX_EVAL:${target},$<TARGET_PROPERTY:${target},NPUSIM_ASCENDC_OPTIONS>>")
    set(incs "$<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>")
    set(defs "$<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>")
    add_custom_command(OUTPUT "${code}"
        COMMAND bash "${NPUSIM_ROOT}/scripts/npusim-ascendc.sh" ${mode} ${arch}
            "$<$<BOOL:${incs}>:-I$<JOIN:${incs},;-I>>"
            "$<$<BOOL:${defs}>:-D$<JOIN:${defs},;-D>>"
            "${opts}" "${kernel}" "${outdir}"
        DEPENDS "${kernel}" ${NPUSIM_ASCENDC_SDK_HEADERS} "${NPUSIM_ROOT}/scripts/npusim-ascendc.sh"
            "${NPUSIM_ROOT}/scripts/ascendc-compile.sh"
        COMMAND_EXPAND_LISTS VERBATIM
        COMMENT "npusim-ascendc ${mode} ${stem}.cpp")
    set(${gen} "${code}" PARENT_SCOPE)
endfunction()

function(ascendc_library name type)
    if(NOT type MATCHES "^(STATIC|SHARED|OBJECT)$")
        message(FATAL_ERROR "ascendc_library(${name} ${type} ...): the type is STATIC or SHARED")
    endif()
    set(generated "")
    set(dirs "")
    foreach(src IN LISTS ARGN)
        get_filename_component(abs "${src}" ABSOLUTE)
        get_filename_component(stem "${src}" NAME_WE)
        set(outdir "${CMAKE_CURRENT_BINARY_DIR}/${name}_npusim/${stem}")
        _npusim_ascendc_command(${name} "" "${abs}" "${outdir}" code)
        list(APPEND generated "${code}")
        list(APPEND dirs "${outdir}")
    endforeach()
    add_library(${name} ${type} ${generated})
    set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON NPUSIM_ASCENDC_OPTIONS "")
    target_include_directories(${name} PUBLIC ${dirs})
    target_link_libraries(${name} PUBLIC npusim_acl)
    # As CANN's ascendc_library: `cmake --install` puts the library in the prefix's lib
    # directory, where a sample's run.sh points LD_LIBRARY_PATH for the installed program.
    include(GNUInstallDirs)
    install(TARGETS ${name}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
endfunction()

# The kernel-compile flags of an ascendc_library (the visibility word is taken and ignored:
# they apply to the kernel compile).
function(_npusim_ascendc_append name prefix)
    set(args ${ARGN})
    list(REMOVE_ITEM args PRIVATE PUBLIC INTERFACE)
    # A generator expression whose value holds a list (`$<IN_LIST:${SOC_VERSION},${LIST}>`)
    # arrives cut at the list's semicolons: its pieces are joined back into one word.
    set(words "")
    set(open 0)
    foreach(a IN LISTS args)
        if(open GREATER 0)
            list(POP_BACK words w)
            set(a "${w}\;${a}")
        endif()
        list(APPEND words "${a}")
        string(REGEX MATCHALL "\\$<" starts "${a}")
        string(REGEX MATCHALL ">" ends "${a}")
        list(LENGTH starts nstarts)
        list(LENGTH ends nends)
        math(EXPR open "${nstarts} - ${nends}")
    endforeach()
    set(flags "")
    foreach(w IN LISTS words)
        if(prefix STREQUAL "")
            list(APPEND flags "${w}")
        elseif(w MATCHES "^\\$<")
            list(APPEND flags "$<$<BOOL:${w}>:${prefix}${w}>")
        elseif(w MATCHES "^${prefix}")
            list(APPEND flags "${w}")
        else()
            if(prefix STREQUAL "-I")
                get_filename_component(w "${w}" ABSOLUTE)
            endif()
            list(APPEND flags "${prefix}${w}")
        endif()
    endforeach()
    # The property is read through $<TARGET_GENEX_EVAL>, which parses its whole text: the
    # semicolons inside a generator expression are its own again there.
    string(REPLACE "\\;" ";" flags "${flags}")
    set_property(TARGET ${name} APPEND PROPERTY NPUSIM_ASCENDC_OPTIONS "${flags}")
endfunction()
function(ascendc_compile_definitions name)
    _npusim_ascendc_append(${name} "-D" ${ARGN})
endfunction()
function(ascendc_include_directories name)
    _npusim_ascendc_append(${name} "-I" ${ARGN})
endfunction()
function(ascendc_compile_options name)
    _npusim_ascendc_append(${name} "" ${ARGN})
endfunction()
