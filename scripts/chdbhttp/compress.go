package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/url"
	"strings"

	"github.com/ClickHouse/ch-go/compress"
)

// ClickHouse's compressed blocks (its native protocol's, and the HTTP
// interface's with compress=1 and decompress=1): a 16-byte CityHash128
// checksum of what follows it, then a method byte, the block's size
// from that byte on (uint32, little-endian, the 9 header bytes
// included), the data's size once decompressed (uint32), and the
// compressed data. ch-go's compress package reads and writes one block.
const (
	blockChecksum = 16
	blockHeader   = blockChecksum + 1 + 4 + 4
	// blockSize is how much of a response one block holds: ClickHouse's
	// max_compress_block_size (1 MiB).
	blockSize = 1 << 20
)

// boolParam reads the URL parameter k as ClickHouse reads a boolean
// setting: absent, 0 or false; 1 or true.
func boolParam(params url.Values, k string) (bool, error) {
	switch v := params.Get(k); strings.ToLower(v) {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	default:
		return false, newError(36, "BAD_ARGUMENTS", "Cannot parse %s=%s as a boolean", k, v)
	}
}

// compressionMethod is the method network_compression_method names for a
// response (LZ4 when it names none), by ClickHouse's names in any case.
func compressionMethod(name string) (compress.Method, error) {
	switch strings.ToUpper(name) {
	case "", "LZ4":
		return compress.LZ4, nil
	case "LZ4HC":
		return compress.LZ4HC, nil
	case "ZSTD":
		return compress.ZSTD, nil
	case "NONE":
		return compress.None, nil
	}
	return 0, newError(432, "UNKNOWN_CODEC", "Unknown codec family code: %s", name)
}

// compressBlocks returns b as compressed blocks of method, blockSize of b
// in each (none when b is empty).
func compressBlocks(b []byte, m compress.Method) ([]byte, error) {
	w := compress.NewWriter(compress.LevelZero, m)
	var out []byte
	for len(b) > 0 {
		n := min(len(b), blockSize)
		if err := w.Compress(b[:n]); err != nil {
			return nil, newError(1001, "STD_EXCEPTION", "compressing the response: %v", err)
		}
		out = append(out, w.Data...)
		b = b[n:]
	}
	return out, nil
}

// decompressBlocks returns the data of the compressed blocks b holds, one
// after the other, each checked against its checksum; more than max bytes
// of it is refused.
func decompressBlocks(b []byte, max int64) ([]byte, error) {
	var out []byte
	for off := 0; off < len(b); {
		if len(b)-off < blockHeader {
			return nil, newError(271, "CANNOT_DECOMPRESS", "Cannot decompress: %d bytes left after the last block, a block header has %d",
				len(b)-off, blockHeader)
		}
		size := blockChecksum + int64(binary.LittleEndian.Uint32(b[off+blockChecksum+1:]))
		data := int64(binary.LittleEndian.Uint32(b[off+blockChecksum+5:]))
		if size < blockHeader || size > int64(len(b)-off) {
			return nil, newError(271, "CANNOT_DECOMPRESS", "Cannot decompress: a block of %d bytes at byte %d, %d sent", size, off, len(b)-off)
		}
		if int64(len(out))+data > max {
			return nil, newError(241, "MEMORY_LIMIT_EXCEEDED", "the request body decompresses to more than %d bytes", max)
		}
		block := b[off : off+int(size)]
		n := len(out)
		out = append(out, make([]byte, data)...)
		r := compress.NewReader(bytes.NewReader(block))
		var err error
		if data == 0 {
			_, err = r.Read(nil) // a block of no data, read for its checksum
		} else {
			_, err = io.ReadFull(r, out[n:])
		}
		if err != nil {
			return nil, newError(271, "CANNOT_DECOMPRESS", "Cannot decompress the block at byte %d: %v", off, err)
		}
		off += int(size)
	}
	return out, nil
}
