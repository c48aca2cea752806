# Every dependency is a Debian package; deploy/install-deps.sh installs them.
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBUV REQUIRED IMPORTED_TARGET libuv>=1.44)
pkg_check_modules(PROTOBUFC REQUIRED IMPORTED_TARGET libprotobuf-c>=1.4)
pkg_check_modules(LZ4 REQUIRED IMPORTED_TARGET liblz4>=1.9)
# XXH3, the sample digest (common/src/digest.c uses its header inline)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash>=0.8)
pkg_check_modules(CHECK REQUIRED IMPORTED_TARGET check>=0.15)
find_package(OpenSSL 3.0 REQUIRED)
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED) # the onnx tests read the gzip-compressed Fashion-MNIST files
find_program(PROTOC_C_EXECUTABLE NAMES protoc-c protoc-gen-c REQUIRED)
