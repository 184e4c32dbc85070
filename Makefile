# Build and install rkubelet as a systemd service.
#   make install                     # rkubelet and rkubelet-snapshot to /usr/local/bin, unit and kubeadm drop-in
#   make install DESTDIR=/tmp/stage  # staged install, for packaging
#   make install KUBEADM_DROPIN=     # without the kubeadm drop-in
# The unit files name /usr/local/bin/rkubelet; install rewrites that to $(PREFIX)/bin.
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR := $(DESTDIR)$(PREFIX)/bin
UNITDIR := $(DESTDIR)/etc/systemd/system
DROPINDIR := $(UNITDIR)/rkubelet.service.d
KUBEADM_DROPIN ?= 10-rkubelet-kubeadm.conf
CARGO ?= cargo
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)

.PHONY: all build install uninstall

all: build

build:
	$(CARGO) build --release --locked

install: build
	install -D -m 0755 $(TARGET_DIR)/release/rkubelet $(BINDIR)/rkubelet
	install -D -m 0755 $(TARGET_DIR)/release/rkubelet-snapshot $(BINDIR)/rkubelet-snapshot
	install -D -m 0644 packaging/rkubelet.service $(UNITDIR)/rkubelet.service
	sed -i 's#/usr/local/bin/rkubelet#$(PREFIX)/bin/rkubelet#' $(UNITDIR)/rkubelet.service
ifneq ($(KUBEADM_DROPIN),)
	install -D -m 0644 packaging/$(KUBEADM_DROPIN) $(DROPINDIR)/$(KUBEADM_DROPIN)
	sed -i 's#/usr/local/bin/rkubelet#$(PREFIX)/bin/rkubelet#' $(DROPINDIR)/$(KUBEADM_DROPIN)
endif
	@if [ -z "$(DESTDIR)" ] && command -v systemctl >/dev/null; then systemctl daemon-reload || true; fi

uninstall:
	rm -f $(BINDIR)/rkubelet $(BINDIR)/rkubelet-snapshot $(UNITDIR)/rkubelet.service $(DROPINDIR)/$(KUBEADM_DROPIN)
	-rmdir $(DROPINDIR) 2>/dev/null
