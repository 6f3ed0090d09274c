# What the top-level CMakeLists.txt sets up for shared/, when shared/ is
# configured alone (`cmake -S shared -B build-lib`): the language level, the
# libraries the outbox libraries and their tests use (no gRPC, no protobuf),
# the install paths and ctest.
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE RelWithDebInfo)
endif()
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)

find_package(Threads REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(SQLiteCpp REQUIRED)
find_package(rabbitmq-c CONFIG REQUIRED)
find_package(OpenSSL 1.1.1 REQUIRED)
find_package(GTest CONFIG REQUIRED)
find_package(CURL REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED)

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(OUTBOX_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/outbox)

enable_testing()
include(GoogleTest)

# As the top-level CMakeLists.txt: the short status macros for the project's
# own sources (shared/base/status_macros.h), a directory property that the
# installed targets do not carry.
add_compile_definitions(OUTBOX_SHORT_STATUS_MACROS)
