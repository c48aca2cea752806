# Warning flags from STYLE.md. They are applied per target with project_warnings(<target>), so
# generated protobuf-c code and fetched code keep their own flags.
set(PROJECT_C_WARNINGS
    -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wpointer-arith -Wformat=2
    -Wundef -Wvla -Wcast-align -Wwrite-strings -Wimplicit-fallthrough -Wno-unused-parameter)
# The pure codecs (common/, compression/) also get the conversion warnings, as nghttp2 does.
set(PROJECT_C_STRICT_WARNINGS -Wconversion -Wsign-conversion)

# CUDA sources (the onnx backend's kernels): nvcc's own warnings plus the host compiler's.
set(PROJECT_CUDA_WARNINGS -Xcompiler=-Wall,-Wextra,-Wshadow,-Wno-unused-parameter)

function(project_warnings target)
    cmake_parse_arguments(PW "STRICT" "" "" ${ARGN})
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C>:${PROJECT_C_WARNINGS}>)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${PROJECT_CUDA_WARNINGS}>)
    if(PW_STRICT)
        target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C>:${PROJECT_C_STRICT_WARNINGS}>)
    endif()
    if(WERROR)
        # nvcc spells it differently (a bare -Werror is a fatal usage error there)
        target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C,CXX>:-Werror>
            "$<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings;-Xcompiler=-Werror>")
    endif()
endfunction()
