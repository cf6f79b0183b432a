# svcenv — one non-recursive Makefile.
#
# Knobs:
#   V=1                         show every command
#   SANITIZE=address,undefined  build with sanitizers (objects go to build/san-*)
#   CC=clang                    another compiler
#   PREFIX=/usr/local DESTDIR=  for `make install`
#   FUZZ_SECONDS=30             time per target for `make fuzz`
#
# Targets: all test demo bench fuzz lint hdr-check install image clean deps

PREFIX ?= /usr/local
DESTDIR ?=
FUZZ_SECONDS ?= 30
PKGS := libcurl yaml-0.1 jansson libwebsockets libssl libcrypto libnftnl libmnl

ifeq ($(SANITIZE),)
BUILD ?= build
SANFLAGS :=
else
BUILD ?= build/san-$(subst $(comma),-,$(SANITIZE))
SANFLAGS := -fsanitize=$(SANITIZE) -fno-sanitize-recover=all -fno-omit-frame-pointer
endif
comma := ,

ifeq ($(V),1)
Q :=
else
Q := @
endif

DEPS_OK := $(shell pkg-config --exists $(PKGS) cmocka ldns 2>/dev/null && echo yes)
# Missing packages: the rule for $(DEPS_MK) installs them, and because an
# included makefile was remade, make starts over and reads the flags below
# anew. So one `make demo` (or `make test`) on a fresh machine does the
# set-up and then the job. Only on make's first pass (no loop), and not for
# `make clean`.
DEPS_MK := $(BUILD)/.deps-installed.mk
ifneq ($(DEPS_OK),yes)
ifeq ($(MAKE_RESTARTS),)
ifneq ($(if $(MAKECMDGOALS),$(filter-out clean,$(MAKECMDGOALS)),all),)
-include $(DEPS_MK)
endif
endif
endif
DEP_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
DEP_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -lm
CMOCKA_LIBS := $(shell pkg-config --libs cmocka 2>/dev/null)

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wmissing-declarations -Wold-style-definition -Wpointer-arith -Wwrite-strings \
	-Wformat=2 -Wundef -Wvla -Wimplicit-fallthrough -Wcast-qual -Wnull-dereference
HARDEN := -fno-common -fstack-protector-strong
ifeq ($(SANITIZE),)
HARDEN += -D_FORTIFY_SOURCE=3
endif
OPT ?= -O2 -g
SE_CFLAGS := -std=gnu11 -D_GNU_SOURCE $(WARN) $(HARDEN) $(OPT) $(SANFLAGS) -Iinclude $(DEP_CFLAGS)
SE_LDFLAGS := -Wl,-z,relro,-z,now $(SANFLAGS)
ALL_CFLAGS = $(SE_CFLAGS) $(EXTRA_CFLAGS) $(CFLAGS)
ALL_LDFLAGS = $(SE_LDFLAGS) $(LDFLAGS)

# --- library: every pkg/*/ folder, one static archive ---
LIB_SRCS := $(sort $(wildcard pkg/*/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
LIB := $(BUILD)/libsvcenv.a

# --- binaries: cmd/<name>/*.c -> build/bin/<name> ---
CMDS := $(notdir $(wildcard cmd/*))
BINS := $(CMDS:%=$(BUILD)/bin/%)

# --- unit tests: test/unit/<pkg>/test_<module>.c, each its own binary ---
TEST_SRCS := $(sort $(wildcard test/unit/*/test_*.c))
TEST_LIB_SRCS := $(sort $(wildcard test/lib/*.c))
TEST_LIB_OBJS := $(TEST_LIB_SRCS:%.c=$(BUILD)/obj/%.o)
TEST_BINS := $(TEST_SRCS:test/unit/%.c=$(BUILD)/test/%)

# --- fuzz targets: test/fuzz/fuzz_<name>.c; replayed under gcc by the standalone driver ---
FUZZ_SRCS := $(sort $(wildcard test/fuzz/fuzz_*.c))
FUZZ_REPLAY := $(FUZZ_SRCS:test/fuzz/%.c=$(BUILD)/fuzz-replay/%)

# --- integration tests: test/integration/<name>.c -> build/integration/<name> ---
INTEG_SRCS := $(sort $(wildcard test/integration/*.c))
INTEG_BINS := $(INTEG_SRCS:test/integration/%.c=$(BUILD)/integration/%)

# --- benchmarks ---
BENCH_SRCS := $(sort $(wildcard test/bench/bench_*.c))
BENCH_BINS := $(BENCH_SRCS:test/bench/%.c=$(BUILD)/bench/%)

.PHONY: all test demo bench fuzz lint hdr-check install image clean deps unit FORCE
.DEFAULT_GOAL := all

all: deps $(BINS)

deps:
ifneq ($(DEPS_OK),yes)
	$(Q)test/ensure-deps
endif

# FORCE: remade whenever it is included, i.e. whenever packages are missing.
$(DEPS_MK): FORCE
	$(Q)test/ensure-deps
	$(Q)pkg-config --exists $(PKGS) cmocka ldns || { echo "make: pkg-config still finds" \
		"no $(PKGS) cmocka ldns after test/ensure-deps" >&2; exit 1; }
	@mkdir -p $(dir $@)
	$(Q)echo "# packages installed by test/ensure-deps; make restarted to read their flags" >$@
FORCE:

# tests dereference typed views right after asserting them; test/lib/ holds
# the helpers every unit test links, with their headers
$(BUILD)/obj/test/%.o: EXTRA_CFLAGS := -Wno-null-dereference -Itest/lib
# banned.h (strcpy, sprintf, ... as compile errors) in every library and
# command source, after the libc headers it shadows
$(BUILD)/obj/pkg/%.o: EXTRA_CFLAGS := -include svcenv/banned.h
$(BUILD)/obj/cmd/%.o: EXTRA_CFLAGS := -include svcenv/banned.h

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(LIB): $(LIB_OBJS)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

.SECONDEXPANSION:
# a function, so that its % is not taken for the pattern rule's stem
objs_of = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
$(BUILD)/bin/%: $$(call objs_of,$$(wildcard cmd/$$*/*.c)) $(LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(DEP_LIBS)

# libraries one test binary needs beyond the rest (test-only decoders)
$(BUILD)/test/dns/test_ldns: TEST_EXTRA_LIBS := $(shell pkg-config --libs ldns 2>/dev/null)

$(BUILD)/test/%: $(BUILD)/obj/test/unit/%.o $(TEST_LIB_OBJS) $(LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(DEP_LIBS) $(CMOCKA_LIBS) $(TEST_EXTRA_LIBS)

$(BUILD)/fuzz-replay/%: $(BUILD)/obj/test/fuzz/%.o $(BUILD)/obj/test/fuzz/replay_main.o $(LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(DEP_LIBS)

$(BUILD)/integration/%: $(BUILD)/obj/test/integration/%.o $(LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(DEP_LIBS)

$(BUILD)/bench/%: $(BUILD)/obj/test/bench/%.o $(LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(DEP_LIBS)

unit: deps $(BINS) $(TEST_BINS) $(FUZZ_REPLAY) $(INTEG_BINS) $(BENCH_BINS)

# The test command of the README: unit tests, corpus replay, golden and CLI tests,
# integration tests. Ends with one line `N passed, N failed`.
test: unit image
	$(Q)BUILD=$(BUILD) test/run-all

# The svcenv image as a docker-archive tarball (binaries + their ldd closure),
# made without a container engine; test/k8s/node imports it into containerd.
IMAGE := $(BUILD)/image/svcenv.tar
image: $(IMAGE)
$(IMAGE): $(BINS) test/k8s/images/svcenv-image test/k8s/images/pack
	@mkdir -p $(dir $@)
	$(Q)test/k8s/images/svcenv-image $(BUILD)/bin $@

demo: all
	$(Q)test/demo $(BUILD)/bin/svcenv

bench: deps $(BINS) $(BENCH_BINS)
	$(Q)test/ensure-deps --bench
	$(Q)BUILD=$(BUILD) test/bench/run

# libFuzzer needs clang; a separate build tree so flags do not mix.
fuzz: deps
	$(Q)$(MAKE) --no-print-directory BUILD=build/fuzz CC=clang OPT="-O1 -g" \
		SANITIZE=address,undefined CFLAGS="-fsanitize=fuzzer-no-link" build/fuzz/libsvcenv.a
	$(Q)FUZZ_SECONDS=$(FUZZ_SECONDS) test/fuzz/run-libfuzzer build/fuzz

HEADERS := $(sort $(wildcard include/svcenv/*.h))
hdr-check: deps
	$(Q)for h in $(HEADERS); do \
		echo "#include <svcenv/$${h##*/}>" | $(CC) $(SE_CFLAGS) -x c -fsyntax-only - || exit 1; \
	done; echo "hdr-check: $(words $(HEADERS)) headers compile on their own"

# check-layers reads the objects (nm), so lint builds them first; banned.h
# makes that build fail on a banned call.
lint: hdr-check $(LIB) $(BINS)
	$(Q)clang-format --dry-run --Werror $(shell git ls-files '*.c' '*.h' 2>/dev/null)
	$(Q)cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
		--inline-suppr --std=c11 -Iinclude -D__GNUC__ --suppress=missingIncludeSystem \
		pkg cmd
	$(Q)BUILD=$(BUILD) test/check-layers
	@echo "lint: ok"

install: all
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BINS) $(DESTDIR)$(PREFIX)/bin/

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
.SECONDARY:
