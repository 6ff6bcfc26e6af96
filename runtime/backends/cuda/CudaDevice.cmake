# The cuda device (included from CMakeLists.txt when HELM_HAVE_CUDA). CudaDevice.cpp is host C++
# over the CUDA runtime, built by the C++ compiler. The runtime is linked statically and the
# driver (libcuda) not at all, so every binary starts on machines without a GPU driver; cuBLAS is
# the toolkit's shared library (it does not link the driver either).
# GLOBAL imported targets (CUDA::*, and Threads::Threads which they use): HelmDevice's link
# interface names them, and it is linked from other directories.
set(helm_saved_targets_global ${CMAKE_FIND_PACKAGE_TARGETS_GLOBAL})
set(CMAKE_FIND_PACKAGE_TARGETS_GLOBAL ON)
find_package(CUDAToolkit REQUIRED)
set(CMAKE_FIND_PACKAGE_TARGETS_GLOBAL ${helm_saved_targets_global})
target_sources(HelmDevice PRIVATE ${CMAKE_CURRENT_LIST_DIR}/CudaDevice.cpp)
target_compile_definitions(HelmDevice PUBLIC HELM_HAVE_CUDA=1)
target_link_libraries(HelmDevice PUBLIC CUDA::cudart_static CUDA::cublas)
