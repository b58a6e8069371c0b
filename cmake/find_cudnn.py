"""Prints where python3's PyPI packages put cuDNN and the cuDNN frontend headers (cmake/cudnn.cmake).

  cudnn_root=<site-packages>/nvidia/cudnn     (nvidia-cudnn-cu13: include/cudnn.h, lib/libcudnn.so.9)
  frontend_include=<site-packages>/include    (nvidia-cudnn-frontend: cudnn_frontend.h)
An empty value: not installed for this interpreter.
"""
import importlib.util
import os
import site
import sys


def cudnn_root():
    try:
        spec = importlib.util.find_spec("nvidia.cudnn")
    except (ImportError, ValueError):
        return ""
    for d in (spec.submodule_search_locations or []) if spec else []:
        if os.path.isfile(os.path.join(d, "include", "cudnn.h")):
            return d
    return ""


def frontend_include():
    dirs = list(sys.path)
    try:
        dirs += site.getsitepackages() + [site.getusersitepackages()]
    except AttributeError:  # virtualenvs of old
        pass
    for d in dirs:
        inc = os.path.join(d, "include")
        if d and os.path.isfile(os.path.join(inc, "cudnn_frontend.h")):
            return inc
    return ""


print("cudnn_root=" + cudnn_root())
print("frontend_include=" + frontend_include())
