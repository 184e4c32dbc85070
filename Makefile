# Build and install rkubelet as a systemd service.
#   make                             # build (the release profile)
#   make install                     # install what was built: rkubelet and rkubelet-snapshot to
#                                    # /usr/local/bin, the unit and kubeadm drop-in, the man page
#                                    # and the bash, zsh and fish completions
#   make install PROFILE=release-unwind  # what ./scripts/run.sh and ./scripts/test.sh build
#   make install DESTDIR=/tmp/stage  # staged install, for packaging
#   make install KUBEADM_DROPIN=     # without the kubeadm drop-in
# `install` builds nothing: it installs the binaries of PROFILE, and says how to build
# them when they are missing. The unit files name /usr/local/bin/rkubelet; install rewrites
# that to $(PREFIX)/bin.
PREFIX ?= /usr/local
DESTDIR ?=
PROFILE ?= release
BINDIR := $(DESTDIR)$(PREFIX)/bin
MANDIR := $(DESTDIR)$(PREFIX)/share/man/man8
BASHDIR := $(DESTDIR)$(PREFIX)/share/bash-completion/completions
ZSHDIR := $(DESTDIR)$(PREFIX)/share/zsh/site-functions
FISHDIR := $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
UNITDIR := $(DESTDIR)/etc/systemd/system
DROPINDIR := $(UNITDIR)/rkubelet.service.d
KUBEADM_DROPIN ?= 10-rkubelet-kubeadm.conf
CARGO ?= cargo
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
BUILT := $(TARGET_DIR)/$(PROFILE)

.PHONY: all build install uninstall

all: build

build:
	$(CARGO) build --profile $(PROFILE) --locked

install:
	@test -x $(BUILT)/rkubelet -a -x $(BUILT)/rkubelet-snapshot || { \
	    echo "make install: no build in $(BUILT); run 'make build PROFILE=$(PROFILE)' first" >&2; exit 1; }
	install -D -m 0755 $(BUILT)/rkubelet $(BINDIR)/rkubelet
	install -D -m 0755 $(BUILT)/rkubelet-snapshot $(BINDIR)/rkubelet-snapshot
	install -d $(MANDIR) $(BASHDIR) $(ZSHDIR) $(FISHDIR)
	$(BUILT)/rkubelet man > $(MANDIR)/rkubelet.8
	$(BUILT)/rkubelet completion bash > $(BASHDIR)/rkubelet
	$(BUILT)/rkubelet completion zsh > $(ZSHDIR)/_rkubelet
	$(BUILT)/rkubelet completion fish > $(FISHDIR)/rkubelet.fish
	install -D -m 0644 packaging/rkubelet.service $(UNITDIR)/rkubelet.service
	sed -i 's#/usr/local/bin/rkubelet#$(PREFIX)/bin/rkubelet#' $(UNITDIR)/rkubelet.service
ifneq ($(KUBEADM_DROPIN),)
	install -D -m 0644 packaging/$(KUBEADM_DROPIN) $(DROPINDIR)/$(KUBEADM_DROPIN)
	sed -i 's#/usr/local/bin/rkubelet#$(PREFIX)/bin/rkubelet#' $(DROPINDIR)/$(KUBEADM_DROPIN)
endif
	@if [ -z "$(DESTDIR)" ] && command -v systemctl >/dev/null; then systemctl daemon-reload || true; fi

uninstall:
	rm -f $(BINDIR)/rkubelet $(BINDIR)/rkubelet-snapshot $(UNITDIR)/rkubelet.service $(DROPINDIR)/$(KUBEADM_DROPIN)
	rm -f $(MANDIR)/rkubelet.8 $(BASHDIR)/rkubelet $(ZSHDIR)/_rkubelet $(FISHDIR)/rkubelet.fish
	-rmdir $(DROPINDIR) 2>/dev/null
