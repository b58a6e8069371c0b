# cuBLASLt, cuDNN and the cuDNN frontend (header-only C++ graph API) for the dense GPU ops
# (kernels/cuda/gemm.cpp, attention_cudnn.cpp, context.cpp). Included after dt_kernels exists,
# only when the CUDA backend is on.
#
# Where cuDNN and the frontend headers come from, first match wins:
#   1. -DCUDNN_ROOT=DIR (DIR/include/cudnn.h, DIR/lib/libcudnn.so.9) and
#      -DCUDNN_FRONTEND_INCLUDE_DIR=DIR (DIR/cudnn_frontend.h);
#   2. python3 on PATH (cmake/find_cudnn.py): the PyPI wheels nvidia-cudnn-cu13 (site-packages/nvidia/cudnn)
#      and nvidia-cudnn-frontend (site-packages/include); scripts/install_deps.sh installs both;
#   3. cuDNN only: the CUDA toolkit's and the system's directories.
# libcudnn.so.9 is linked by full path with an RPATH to its folder (the wheel has no libcudnn.so link and
# is not on the loader's path; the library finds its sub-libraries next to itself).
#
# When cuDNN or the frontend is missing the build still succeeds and attention_forward/backward throw at
# run time with the pip command to fix it: every other CUDA op (GEMMs, GDN, elementwise) works without
# cuDNN, and CI builds the CUDA sources on a machine that has nvcc but no GPU.
target_link_libraries(dt_kernels PUBLIC CUDA::cublasLt)

set(CUDNN_ROOT "" CACHE PATH "cuDNN root (include/cudnn.h, lib/libcudnn.so.9); empty: python3's nvidia-cudnn-cu13")
set(CUDNN_FRONTEND_INCLUDE_DIR "" CACHE PATH "Folder of cudnn_frontend.h; empty: python3's nvidia-cudnn-frontend")

set(_dt_cudnn_root "${CUDNN_ROOT}")
set(_dt_fe_include "${CUDNN_FRONTEND_INCLUDE_DIR}")
find_program(DELTATRON_PYTHON3 python3)
if(DELTATRON_PYTHON3 AND (NOT _dt_cudnn_root OR NOT _dt_fe_include))
  execute_process(COMMAND ${DELTATRON_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/find_cudnn.py
                  OUTPUT_VARIABLE _dt_py_out ERROR_QUIET RESULT_VARIABLE _dt_py_rc)
  if(_dt_py_rc EQUAL 0)
    string(REGEX MATCH "cudnn_root=([^\n]*)" _m "${_dt_py_out}")
    if(NOT _dt_cudnn_root)
      set(_dt_cudnn_root "${CMAKE_MATCH_1}")
    endif()
    string(REGEX MATCH "frontend_include=([^\n]*)" _m "${_dt_py_out}")
    if(NOT _dt_fe_include)
      set(_dt_fe_include "${CMAKE_MATCH_1}")
    endif()
  endif()
endif()

# Header and library from the same root when there is one, else the toolkit's / system's.
if(_dt_cudnn_root)
  find_path(DELTATRON_CUDNN_INCLUDE_DIR cudnn.h PATHS ${_dt_cudnn_root}/include NO_DEFAULT_PATH)
  find_library(DELTATRON_CUDNN_LIBRARY NAMES libcudnn.so.9 cudnn PATHS ${_dt_cudnn_root}/lib ${_dt_cudnn_root}/lib64
               NO_DEFAULT_PATH)
endif()
find_path(DELTATRON_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
find_library(DELTATRON_CUDNN_LIBRARY NAMES libcudnn.so.9 cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})

set(DELTATRON_HAVE_CUDNN OFF)
set(_dt_why "")
if(NOT DELTATRON_CUDNN_INCLUDE_DIR OR NOT DELTATRON_CUDNN_LIBRARY)
  set(_dt_why "cuDNN not found")
elseif(NOT _dt_fe_include OR NOT EXISTS "${_dt_fe_include}/cudnn_frontend.h")
  set(_dt_why "cuDNN frontend headers (cudnn_frontend.h) not found")
else()
  file(STRINGS "${DELTATRON_CUDNN_INCLUDE_DIR}/cudnn_version.h" _dt_v REGEX "define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ")
  string(REGEX REPLACE ".*CUDNN_MAJOR ([0-9]+).*" "\\1" _dt_major "${_dt_v}")
  string(REGEX REPLACE ".*CUDNN_MINOR ([0-9]+).*" "\\1" _dt_minor "${_dt_v}")
  string(REGEX REPLACE ".*CUDNN_PATCHLEVEL ([0-9]+).*" "\\1" _dt_patch "${_dt_v}")
  if(NOT _dt_major EQUAL 9)
    set(_dt_why "cuDNN ${_dt_major}.${_dt_minor} at ${DELTATRON_CUDNN_INCLUDE_DIR} is not cuDNN 9")
  else()
    set(DELTATRON_HAVE_CUDNN ON)
  endif()
endif()

if(DELTATRON_HAVE_CUDNN)
  get_filename_component(_dt_cudnn_libdir "${DELTATRON_CUDNN_LIBRARY}" DIRECTORY)
  message(STATUS "deltatron: cuDNN ${_dt_major}.${_dt_minor}.${_dt_patch} (${DELTATRON_CUDNN_LIBRARY}), "
                 "frontend headers ${_dt_fe_include}")
  # SKIP_JSON_LIB: we never serialise graphs, and it halves the compile time of attention_cudnn.cpp.
  target_compile_definitions(dt_kernels PRIVATE DELTATRON_HAVE_CUDNN=1 CUDNN_FRONTEND_SKIP_JSON_LIB=1)
  # SYSTEM: the frontend's headers are not ours to make -Wall -Wextra clean; BEFORE: this cudnn.h, not
  # another copy in the CUDA toolkit's include folder, matches the library we link.
  target_include_directories(dt_kernels SYSTEM BEFORE PRIVATE ${DELTATRON_CUDNN_INCLUDE_DIR} ${_dt_fe_include})
  # nvrtc: the frontend's headers define an NVRTC-compiled engine (RmsNorm+SiLU) that the linker keeps.
  target_link_libraries(dt_kernels PUBLIC ${DELTATRON_CUDNN_LIBRARY} CUDA::nvrtc)
  target_link_options(dt_kernels INTERFACE "LINKER:-rpath,${_dt_cudnn_libdir}")
else()
  message(WARNING "deltatron: ${_dt_why}: building without cuDNN; attention on the GPU will fail at run time. "
                  "Fix: python3 -m pip install \"nvidia-cudnn-cu13==9.19.*\" \"nvidia-cudnn-frontend==1.32.*\" "
                  "(or scripts/install_deps.sh), or pass -DCUDNN_ROOT=... -DCUDNN_FRONTEND_INCLUDE_DIR=...")
endif()
