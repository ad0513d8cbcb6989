# daemon/local.mk: (filled in by the daemon work)
