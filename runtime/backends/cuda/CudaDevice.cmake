# The cuda device (included from CMakeLists.txt when HELM_HAVE_CUDA). CudaDevice.cpp is host C++
# over the CUDA runtime, built by the C++ compiler. The runtime is linked statically and the
# driver (libcuda) not at all, so every binary starts on machines without a GPU driver. cuBLAS is
# not linked: Cublas.cpp loads the toolkit's shared library with dlopen when the first CUDA device
# is created (a run on the CPU never pays for it), by the soname of the toolkit found here.
# GLOBAL imported targets (CUDA::*, and Threads::Threads which they use): HelmDevice's link
# interface names them, and it is linked from other directories.
set(helm_saved_targets_global ${CMAKE_FIND_PACKAGE_TARGETS_GLOBAL})
set(CMAKE_FIND_PACKAGE_TARGETS_GLOBAL ON)
find_package(CUDAToolkit REQUIRED)
set(CMAKE_FIND_PACKAGE_TARGETS_GLOBAL ${helm_saved_targets_global})
target_sources(HelmDevice PRIVATE ${CMAKE_CURRENT_LIST_DIR}/CudaDevice.cpp
                                  ${CMAKE_CURRENT_LIST_DIR}/Cublas.cpp)
target_compile_definitions(HelmDevice PUBLIC HELM_HAVE_CUDA=1)
# Where Cublas.cpp looks for cuBLAS after the loader's own search: this toolkit's libraries.
target_compile_definitions(HelmDevice PRIVATE HELM_CUBLAS_DIR="${CUDAToolkit_LIBRARY_DIR}")
# The headers only (cublas_v2.h): the library is loaded at run time.
target_include_directories(HelmDevice PUBLIC ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(HelmDevice PUBLIC CUDA::cudart_static ${CMAKE_DL_LIBS})
