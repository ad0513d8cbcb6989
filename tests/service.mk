# tests/service.mk
