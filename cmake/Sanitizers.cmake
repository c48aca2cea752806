# ASAN (AddressSanitizer + UndefinedBehaviorSanitizer) and TSAN are mutually exclusive.
# The compile flags are for the C and C++ compilers only: nvcc (the onnx backend's CUDA kernels)
# does not take them, and its device code cannot be instrumented anyway.
if(FUZZ AND NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "FUZZ=ON needs clang: configure with CC=clang")
endif()
if(FUZZ)
    # Every library a fuzz target links is instrumented too, not only the target's own file: the
    # ASAN build's flags (and its exceptions, such as plugins linked without --no-undefined), and
    # coverage to guide libFuzzer through the code under test.
    set(ASAN ON)
    add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link>")
endif()
if(ASAN AND TSAN)
    message(FATAL_ERROR "ASAN and TSAN cannot be combined; configure two build directories")
endif()
if(ASAN)
    add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=address,undefined;-fno-sanitize-recover=all;-fno-omit-frame-pointer>")
    add_link_options(-fsanitize=address,undefined -fno-sanitize-recover=all)
endif()
if(TSAN)
    add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=thread;-fno-omit-frame-pointer>")
    add_link_options(-fsanitize=thread)
endif()
