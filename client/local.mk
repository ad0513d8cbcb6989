# client/local.mk: (filled in by the client work)
