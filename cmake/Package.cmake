# CPack: `cpack -G DEB` in the build directory makes spmd_<version>_<arch>.deb of everything
# `cmake --install` ships (libspmd.so, headers, the CMake package, spmd-opt, spmd-run and the
# training sample). Its Depends come from dpkg-shlibdeps (the Debian packages of the libraries
# the binaries load: MLIR/LLVM 19, oneDNN, Open MPI, zlib, ...). CUDA 13 under /usr/local/cuda is
# no Debian package: its libraries are left out of Depends and found at run time through the
# RUNPATH (the CUDA backend needs it installed; the CPU backend runs without a GPU).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME spmd)
set(CPACK_PACKAGE_VENDOR "spmd")
set(CPACK_PACKAGE_CONTACT "spmd developers <spmd@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "C++ SPMD compiler and runtime (data-parallel training, pmap)")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS /usr/local/cuda/lib /usr/local/cuda/lib64)
# The sample reads the data set's package by default; consumers compile against the headers.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "dataset-fashion-mnist, openmpi-bin, g++, cmake")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
include(CPack)
