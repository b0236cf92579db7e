#!/usr/bin/env python3
"""Zero every device-code entry of a CUDA library's fat binaries except the SASS for one
architecture, so the library compresses to a fraction of its size (for carrying test copies
of libnccl.so.2 to a GPU machine). The ELF layout is unchanged; only payload bytes of other
architectures become zeros. usage: prune-fatbin.py IN OUT SM (e.g. 90)"""
import struct, sys

src, dst, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = bytearray(open(src, "rb").read())
magic = struct.pack("<I", 0xBA55ED50)
i = data.find(magic)
kept = zeroed = 0
while i != -1:
    _ver, hs, size = struct.unpack_from("<HHQ", data, i + 4)
    j, end = i + hs, i + hs + size
    while j + 40 <= end:
        kind, _ev, ehs, padded = struct.unpack_from("<HHII", data, j)
        sm = struct.unpack_from("<I", data, j + 28)[0]
        if ehs == 0 or j + ehs + padded > end:
            break
        if kind == 2 and sm == keep:
            kept += padded
        else:
            data[j + ehs:j + ehs + padded] = bytes(padded)
            zeroed += padded
        j += ehs + padded
    i = data.find(magic, end)
open(dst, "wb").write(data)
print(f"kept {kept} bytes of sm_{keep} code, zeroed {zeroed}")
