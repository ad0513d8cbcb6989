# tests/cuda.mk
