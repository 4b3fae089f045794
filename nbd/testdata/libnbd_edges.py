# Edge cases of purerbd's NBD server driven through libnbd (python3-libnbd).
# Usage: libnbd_edges.py SOCKET EXPORT SIZE
# The export must be empty (all zeroes) and writable. Prints "ALL OK" at
# the end; any failure raises.
import errno
import sys

import nbd

sock, export, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
uri = "nbd+unix:///%s?socket=%s" % (export, sock)


def expect_error(fn, want, what):
    try:
        fn()
    except nbd.Error as e:
        got = e.errno if isinstance(e.errno, int) else getattr(errno, str(e.errno), e.errno)
        if got != want:
            raise AssertionError("%s: errno %s, want %s (%s)" % (what, e.errno, errno.errorcode[want], e))
        print("OK", what)
        return
    raise AssertionError("%s: no error" % what)


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("OK", what)


# --- Option haggling in opt mode -----------------------------------------
h = nbd.NBD()
h.set_opt_mode(True)
h.connect_uri(uri)
names = []
h.opt_list(lambda name, desc: names.append(name))
check(export in names, "NBD_OPT_LIST names the export")
contexts = []
n = h.opt_list_meta_context(lambda name: contexts.append(name))
check(contexts == ["base:allocation"] and n == 1, "LIST_META_CONTEXT offers base:allocation")
h.set_export_name("no-such-export")
expect_error(h.opt_info, errno.ENOENT, "NBD_OPT_INFO on an unknown export")
h.set_export_name(export)
h.opt_info()
check(h.get_size() == size, "NBD_OPT_INFO gives the size")
h.add_meta_context("x-unknown:thing")  # unknown namespace: ignored
h.add_meta_context("base:allocation")
h.opt_go()
check(h.get_structured_replies_negotiated(), "structured replies negotiated")
check(h.can_meta_context("base:allocation"), "base:allocation selected")
check(not h.can_meta_context("x-unknown:thing"), "unknown context not selected")
check(h.can_df() and h.can_fast_zero() and h.can_cache() and h.can_multi_conn(), "DF, FAST_ZERO, CACHE, MULTI_CONN offered")

# --- Requests outside the export keep the connection usable --------------
h.set_strict_mode(0)  # let bad requests reach the server
expect_error(lambda: h.pread(4096, size), errno.EINVAL, "read past the end")
expect_error(lambda: h.pread(4096, size - 2048), errno.EINVAL, "read across the end")
expect_error(lambda: h.pwrite(b"x" * 4096, size - 1), errno.ENOSPC, "write across the end")
expect_error(lambda: h.trim(4096, size), errno.EINVAL, "trim past the end")
expect_error(lambda: h.zero(4096, size), errno.ENOSPC, "write zeroes past the end")
expect_error(lambda: h.block_status(4096, size, lambda *a: 0), errno.EINVAL, "block status past the end")
expect_error(lambda: h.pread(512, 0, nbd.CMD_FLAG_REQ_ONE), errno.EINVAL, "read with a block-status flag")
expect_error(lambda: h.pread(33 << 20, 0), errno.EOVERFLOW, "read over the maximum payload")
check(h.pread(512, 0) == bytes(512), "connection still works after the errors")

# --- Data, holes and block status ----------------------------------------
data = bytes(range(256)) * 256  # 64 KiB
h.pwrite(data, 1 << 20)
check(h.pread(len(data), 1 << 20) == data, "write then read back")
h.pwrite(b"\xff" * 4096, 8192, nbd.CMD_FLAG_FUA)
check(h.pread(4096, 8192) == b"\xff" * 4096, "FUA write")
h.flush()

extents = []


def collect(metacontext, offset, entries, err):
    extents.append((metacontext, offset, list(entries)))
    return 0


h.block_status(4 << 20, 0, collect)
ctx, off, ent = extents[0]
check(ctx == "base:allocation" and off == 0, "block status chunk for base:allocation")
pairs = list(zip(ent[0::2], ent[1::2]))
# 64 KiB chunks: [0,64K) data (the FUA write), [64K,1M) hole, [1M,1M+64K) data.
check(pairs[0] == (64 << 10, 0), "first extent is data: %r" % (pairs[:4],))
check(pairs[1] == ((1 << 20) - (64 << 10), 3), "then a hole that reads as zero")
check(pairs[2] == (64 << 10, 0), "then data again")
extents.clear()
h.block_status(size, 0, collect, nbd.CMD_FLAG_REQ_ONE)
ent = extents[0][2]
check(len(ent) == 2 and ent[0] == 64 << 10, "REQ_ONE gives one extent")

# A structured read over data and hole sends a hole chunk...
chunks = []


def chunk(buf, offset, status, err):
    chunks.append((offset, len(buf), status))
    return 0


buf = h.pread_structured(2 << 20, 0, chunk)
check(buf[8192:12288] == b"\xff" * 4096 and buf[1 << 20:(1 << 20) + len(data)] == data, "sparse read data")
check(any(s == nbd.READ_HOLE for (_, _, s) in chunks), "sparse read sends OFFSET_HOLE chunks")
# ...but one data chunk with DF.
chunks.clear()
buf = h.pread_structured(2 << 20, 0, chunk, nbd.CMD_FLAG_DF)
check(len(chunks) == 1 and chunks[0][2] == nbd.READ_DATA, "DF read is one data chunk")
check(buf[1 << 20:(1 << 20) + len(data)] == data, "DF read data")

# Trim and zeroes.
h.trim(64 << 10, 1 << 20)
check(h.pread(64 << 10, 1 << 20) == bytes(64 << 10), "trimmed chunk reads as zero")
h.pwrite(b"\x01" * 8192, 2 << 20)
h.zero(8192, 2 << 20, nbd.CMD_FLAG_NO_HOLE)
check(h.pread(8192, 2 << 20) == bytes(8192), "zero with NO_HOLE")
h.pwrite(b"\x02" * 8192, 3 << 20)
h.zero(8192, 3 << 20, nbd.CMD_FLAG_FAST_ZERO)
check(h.pread(8192, 3 << 20) == bytes(8192), "fast zero")
h.cache(1 << 20, 0)
check(True, "cache")

# Many requests in flight on one connection, answered out of order.
cookies = []
for i in range(64):
    cookies.append(h.aio_pwrite(bytes([i]) * 4096, (4 << 20) + i * 4096))
while h.aio_in_flight() > 0:
    h.poll(-1)
for c in cookies:
    h.aio_command_completed(c)
bufs = [nbd.Buffer(4096) for _ in range(64)]
cookies = [h.aio_pread(bufs[i], (4 << 20) + i * 4096) for i in range(64)]
while h.aio_in_flight() > 0:
    h.poll(-1)
check(all(bufs[i].to_bytearray() == bytes([i]) * 4096 for i in range(64)), "64 pipelined writes and reads")
h.shutdown()

# --- Without structured replies ------------------------------------------
h = nbd.NBD()
h.set_request_structured_replies(False)
h.connect_uri(uri)
check(not h.get_structured_replies_negotiated(), "simple replies when not negotiated")
check(not h.can_df(), "no DF without structured replies")
h.set_strict_mode(0)
expect_error(lambda: h.pread(4096, size), errno.EINVAL, "simple reply error past the end")
check(h.pread(4096, 8192) == b"\xff" * 4096, "simple read after an error")
h.shutdown()

# --- Abort ---------------------------------------------------------------
h = nbd.NBD()
h.set_opt_mode(True)
h.connect_uri(uri)
h.opt_abort()
check(h.aio_is_closed() or h.aio_is_dead(), "closed after NBD_OPT_ABORT")
try:
    h.opt_list(lambda name, desc: 0)
    raise AssertionError("option after abort succeeded")
except nbd.Error:
    print("OK option after abort refused")

print("ALL OK")
