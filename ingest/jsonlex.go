package ingest

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The lexical layer of the OTLP/JSON decoder (jsondec.go): errors, the
// structure (objects, arrays, the depth), field names, strings, numbers,
// ids and bytes, each read as pdata's jsoniter reads it, and unknown
// values skipped as jsoniter's Skip checks them.

// jsonError is a decoding error: what was wrong (msg), where in the request
// (off, a byte offset) and in which field (path, built as the error goes
// back up: resourceSpans[0].scopeSpans[0].spans[3].kind).
type jsonError struct {
	path  string
	msg   string
	off   int
	at    string // where, when the caller knows better than off ("at column 7")
	id    bool   // a trace or span id that is not hex (nor base64)
	cause error  // errEmptyName, errLongNumber, or nil
}

func (e *jsonError) Unwrap() error { return e.cause }

func (e *jsonError) Error() string {
	s := e.msg
	if e.path != "" {
		s = e.path + ": " + s
	}
	if e.at != "" {
		s += " " + e.at
	} else {
		s += " at offset " + strconv.Itoa(e.off)
	}
	if e.id {
		s = "trace and span ids must be hex in OTLP/JSON (32 and 16 digits): " + s
	}
	return s
}

// placeJSONError says where a decoding error is as a line and column of a
// file, given the line the request b starts on: as the JSON lines reader's
// own errors say it.
func placeJSONError(err error, b []byte, line int) {
	var e *jsonError
	if !errors.As(err, &e) || e.off > len(b) {
		return
	}
	nl := bytes.Count(b[:e.off], []byte{'\n'})
	col := e.off - bytes.LastIndexByte(b[:e.off], '\n')
	if nl == 0 {
		e.at = fmt.Sprintf("at column %d", col)
	} else {
		e.at = fmt.Sprintf("on line %d, column %d", line+nl, col)
	}
}

// jErr is the error for what is wrong at b[i].
func jErr(i int, format string, args ...any) error {
	return &jsonError{msg: fmt.Sprintf(format, args...), off: i}
}

// in adds a field name (or an index, "[3]") in front of err's path.
func in(err error, seg string) error {
	var e *jsonError
	if !errors.As(err, &e) {
		return err
	}
	switch {
	case e.path == "":
		e.path = seg
	case e.path[0] == '[':
		e.path = seg + e.path
	default:
		e.path = seg + "." + e.path
	}
	return err
}

func inKey(err error, key []byte) error { return in(err, string(key)) }
func inIndex(err error, n int) error    { return in(err, "["+strconv.Itoa(n)+"]") }

// found names the value at b[i] in an error.
func found(b []byte, i int) string {
	if i >= len(b) {
		return "the end of the request"
	}
	switch c := b[i]; {
	case c == '"':
		return "a string"
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == 'n':
		return "null"
	case c == 't' || c == 'f':
		return "a bool"
	case c == '-' || '0' <= c && c <= '9':
		return "a number"
	default:
		return quoteByte(c)
	}
}

var errEndOfRequest = errors.New("the request ends early")

// jws skips JSON whitespace.
func jws(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// jOpen starts reading an object (open '{') or an array ('[') at b[i]
// (after whitespace): null is an empty one. It returns the index of the
// first member or element, and whether there is one (if not, the index is
// past the value). It keeps the stack of open containers, to check that
// each is closed by its own bracket, and bounds it to MaxJSONDepth.
func (d *Decoder) jOpen(b []byte, i int, open byte) (int, bool, error) {
	if i >= len(b) {
		return i, false, jErr(i, "%v", errEndOfRequest)
	}
	switch b[i] {
	case open:
		if d.depth >= MaxJSONDepth {
			return i, false, jErr(i, "JSON nested deeper than %d levels", MaxJSONDepth)
		}
		if open == '[' {
			d.arrays |= 1 << d.depth
		} else {
			d.arrays &^= 1 << d.depth
		}
		d.depth++
		i = jws(b, i+1)
		if i < len(b) && b[i] == open+2 { // '{'+2 is '}', '['+2 is ']'
			d.depth--
			return i + 1, false, nil
		}
		return i, true, nil
	case 'n':
		return lit(b, i, "null")
	}
	if open == '{' {
		return i, false, jErr(i, "want an object, found %s", found(b, i))
	}
	return i, false, jErr(i, "want an array, found %s", found(b, i))
}

// lit checks the literal word at b[i] and returns the index past it.
func lit(b []byte, i int, word string) (int, bool, error) {
	if len(b)-i < len(word) || string(b[i:i+len(word)]) != word {
		return i, false, jErr(i, "unexpected %s", found(b, i))
	}
	return i + len(word), false, nil
}

// jNext moves past the comma after a member or element (then more is true)
// or past the bracket that ends the object or array.
func (d *Decoder) jNext(b []byte, i int) (int, bool, error) {
	i = jws(b, i)
	if i < len(b) {
		switch c := b[i]; c {
		case ',':
			return jws(b, i+1), true, nil
		case '}', ']':
			if d.depth > 0 && (d.arrays>>(d.depth-1)&1 == 1) == (c == ']') {
				d.depth--
				return i + 1, false, nil
			}
		}
	}
	return i, false, jErr(i, "unexpected %s", found(b, i))
}

// jKey reads the member name at b[i] and the colon after it, and returns
// the name (a view of b, or a copy if it has escapes; raw says it has
// none) and the index of the value.
func (d *Decoder) jKey(b []byte, i int) (key []byte, raw bool, next int, err error) {
	if i >= len(b) || b[i] != '"' {
		return nil, false, i, jErr(i, "want a field name, found %s", found(b, i))
	}
	j := strSpecial(b, i+1)
	if j < len(b) && b[j] == '"' {
		key, raw, next = b[i+1:j], true, j+1
	} else {
		// Escaped names are rare: each gets its own copy, so that it
		// outlives the names inside its value (errors name it).
		if key, next, err = d.strSlow(nil, b, i+1, j, true); err != nil {
			return nil, false, next, err
		}
	}
	next = jws(b, next)
	if next >= len(b) || b[next] != ':' {
		return nil, false, next, jErr(next, "want ':' after a field name, found %s", found(b, next))
	}
	return key, raw, jws(b, next+1), nil
}

// quickName is a field name as producers write it, quoted, with its colon
// (`"key":`), at most 16 bytes, as two little-endian words and masks: the
// fast path past jField for the names that come in every attribute.
type quickName struct {
	s    string
	w, m [2]uint64
}

func newQuick(s string) *quickName {
	q := &quickName{s: s}
	for k := 0; k < len(s) && k < 16; k++ {
		q.w[k/8] |= uint64(s[k]) << (8 * (k % 8))
		q.m[k/8] |= 0xff << (8 * (k % 8))
	}
	return q
}

var (
	qKey         = newQuick(`"key":`)
	qValue       = newQuick(`"value":`)
	qStringValue = newQuick(`"stringValue":`)
	qIntValue    = newQuick(`"intValue":`)
)

// at reports whether b[i:] starts with the name.
func (q *quickName) at(b []byte, i int) bool {
	if len(b)-i < 16 {
		return len(b)-i >= len(q.s) && string(b[i:i+len(q.s)]) == q.s
	}
	return binary.LittleEndian.Uint64(b[i:])&q.m[0] == q.w[0] &&
		binary.LittleEndian.Uint64(b[i+8:])&q.m[1] == q.w[1]
}

// errEmptyName is what jField says of a field named "" (see jField).
var errEmptyName = errors.New(`a field named "" (pdata would read the rest of the request out of step)`)

// jField is jKey for an object whose fields are read (not skipped). It
// rejects a field named "": pdata's generated decoders stop at the first
// field whose name is "" (jsoniter's ReadObject returns "" at the end of
// an object too) and go on reading the rest of the request out of step,
// so that what they make of it is not what it says (often they then fail,
// sometimes they return what the request's first fields held). No OTLP
// producer writes such a field; the request is rejected, where pdata's
// result would be arbitrary.
func (d *Decoder) jField(b []byte, i int) ([]byte, bool, int, error) {
	key, raw, next, err := d.jKey(b, i)
	if err == nil && len(key) == 0 {
		return nil, false, next, &jsonError{msg: errEmptyName.Error(), off: i, cause: errEmptyName}
	}
	return key, raw, next, err
}

const ctlMask = lsb * 0x20

// strSpecial returns the index of the first '"', '\\' or control character
// in b at or after i, or len(b). It looks at 8 bytes at a time: most of a
// request's bytes are inside strings.
func strSpecial(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		q := w ^ lsb*'"'
		e := w ^ lsb*'\\'
		// The lowest byte flagged is exact (borrows travel upwards only).
		if m := ((q-lsb)&^q | (e-lsb)&^e | (w-ctlMask)&^w) & msb; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 {
			return i
		}
	}
	return len(b)
}

// Ways jStr keeps a string.
const (
	strCheck = iota // only check it
	strView         // return it; escaped, in d.esc (valid until the next strView)
	strKeep         // return it; escaped, in the span's arena (valid until the next span)
)

// jStr reads a string value at b[i] as jsoniter's ReadString does (null is
// ""), and returns it as mode says.
func (d *Decoder) jStr(b []byte, i int, mode int) ([]byte, int, error) {
	if i < len(b) && b[i] == 'n' {
		i, _, err := lit(b, i, "null")
		return nil, i, err
	}
	if i >= len(b) || b[i] != '"' {
		return nil, i, jErr(i, "want a string, found %s", found(b, i))
	}
	j := strSpecial(b, i+1)
	if j < len(b) && b[j] == '"' {
		return b[i+1 : j], j + 1, nil
	}
	switch mode {
	case strCheck:
		_, next, err := d.strSlow(nil, b, i+1, j, false)
		return nil, next, err
	case strView:
		var next int
		var err error
		d.esc, next, err = d.strSlow(d.esc[:0], b, i+1, j, true)
		return d.esc, next, err
	}
	var next int
	var err error
	d.esc, next, err = d.strSlow(d.esc[:0], b, i+1, j, true)
	if err != nil {
		return nil, next, err
	}
	return d.keep(d.esc), next, nil
}

// keep copies s into the span's arena, which never moves what it holds:
// when it is full a new one is started (the old one lives on as long as
// views of it do).
func (d *Decoder) keep(s []byte) []byte {
	if cap(d.arena)-len(d.arena) < len(s) {
		d.arena = make([]byte, 0, max(2*cap(d.arena), len(s), 1024))
	}
	n := len(d.arena)
	d.arena = append(d.arena, s...)
	return d.arena[n:len(d.arena):len(d.arena)]
}

// strSlow reads the rest of a string whose content starts at b[start] and
// whose first special byte is at b[j]: a control character there is an
// error; from a backslash on, escapes are decoded as jsoniter decodes
// them, and control characters are kept. It appends the content to dst
// when out is true, and returns the index past the closing quote.
func (d *Decoder) strSlow(dst, b []byte, start, j int, out bool) ([]byte, int, error) {
	if j >= len(b) {
		return dst, j, jErr(j, "the request ends inside a string")
	}
	if b[j] != '\\' { // a control character: '"' is the fast path's
		return dst, j, jErr(j, "control character 0x%02x in a string (escape it)", b[j])
	}
	if out {
		dst = append(dst, b[start:j]...)
	}
	i := j
	for i < len(b) {
		c := b[i]
		switch c {
		case '"':
			return dst, i + 1, nil
		case '\\':
			var err error
			if dst, i, err = escape(dst, b, i+1, out); err != nil {
				return dst, i, err
			}
		default:
			if out {
				dst = append(dst, c)
			}
			i++
		}
	}
	return dst, i, jErr(i, "the request ends inside a string")
}

// escape decodes the escape whose letter is at b[i] (after a backslash),
// as jsoniter's readEscapedChar does: a \u escape that is a surrogate
// pairs with a \u escape right after it if they make a pair, else each is
// U+FFFD (or the second what it is).
func escape(dst, b []byte, i int, out bool) ([]byte, int, error) {
	if i >= len(b) {
		return dst, i, jErr(i, "the request ends inside a string")
	}
	var r rune
	switch c := b[i]; c {
	case 'u':
		var ok bool
		if r, ok = u4(b, i+1); !ok {
			return dst, i, jErr(i-1, "invalid \\u escape in a string")
		}
		i += 5
		if utf16.IsSurrogate(r) {
			if i >= len(b) || b[i] != '\\' {
				break
			}
			if i+1 >= len(b) {
				return dst, i, jErr(i, "the request ends inside a string")
			}
			if b[i+1] != 'u' {
				if out {
					dst = utf8.AppendRune(dst, r)
				}
				return escape(dst, b, i+1, out)
			}
			r2, ok := u4(b, i+2)
			if !ok {
				return dst, i, jErr(i, "invalid \\u escape in a string")
			}
			i += 6
			if p := utf16.DecodeRune(r, r2); p != utf8.RuneError {
				r = p
			} else if out {
				dst = utf8.AppendRune(dst, r)
				r = r2
			}
		}
	case '"', '\\', '/':
		r, i = rune(c), i+1
	case 'b':
		r, i = '\b', i+1
	case 'f':
		r, i = '\f', i+1
	case 'n':
		r, i = '\n', i+1
	case 'r':
		r, i = '\r', i+1
	case 't':
		r, i = '\t', i+1
	default:
		return dst, i, jErr(i-1, "invalid escape %s in a string", quoteByte(c))
	}
	if out {
		// utf8.AppendRune writes U+FFFD for a surrogate, as jsoniter does.
		dst = utf8.AppendRune(dst, r)
	}
	return dst, i, nil
}

// u4 reads the 4 hex digits of a \u escape at b[i:].
func u4(b []byte, i int) (rune, bool) {
	if len(b)-i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		h := hexVal[c]
		if h > 15 {
			return 0, false
		}
		r = r<<4 | rune(h)
	}
	return r, true
}

var hexVal = func() (t [256]uint8) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = uint8(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = uint8(c - 'a' + 10)
		t[c-'a'+'A'] = uint8(c - 'a' + 10)
	}
	return t
}()

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// numEnd returns the end of the number token at b[i]: the run of bytes
// that may be part of a number (the scanner checked no more than that).
func numEnd(b []byte, i int) int {
	for i < len(b) && isNumberByte(b[i]) {
		i++
	}
	return i
}

// jsoniterUint is jsoniter's readUint64 (size 64) or readUint32 (size 32)
// of the digits ds, with its overflow check as it is: a digit that makes
// the value wrap is caught only if the wrapped value is smaller.
func jsoniterUint(ds []byte, size int) (uint64, bool) {
	mask := uint64(math.MaxUint64)
	if size == 32 {
		mask = math.MaxUint32
	}
	safe := mask/10 - 1
	var v uint64
	for _, c := range ds {
		if !isDigit(c) {
			return 0, false
		}
		n := (v*10 + uint64(c-'0')) & mask
		if v > safe && n < v {
			return 0, false
		}
		v = n
	}
	return v, true
}

// numUint reads an unsigned integer number token as jsoniter does: the
// whole token must be a JSON integer.
func numUint(tok []byte, size int) (uint64, bool) {
	if len(tok) == 0 || !isDigit(tok[0]) || tok[0] == '0' && len(tok) > 1 {
		return 0, false
	}
	return jsoniterUint(tok, size)
}

// jUint reads an unsigned integer field of size bits (pdata's ReadUint32,
// ReadUint64): a number, or a string strconv parses.
func (d *Decoder) jUint(b []byte, i int, size int) (uint64, int, error) {
	if i < len(b) && b[i] == '"' {
		s, next, err := d.jStr(b, i, strView)
		if err != nil {
			return 0, next, err
		}
		if v, ok := shortUint(s, size); ok {
			return v, next, nil
		}
		v, perr := strconv.ParseUint(bytesView(s), 10, size)
		if perr != nil {
			return 0, next, jErr(i, "%q is not a %d-bit unsigned integer", s, size)
		}
		return v, next, nil
	}
	if i < len(b) && (b[i] == '-' || isDigit(b[i])) {
		e := numEnd(b, i)
		v, ok := numUint(b[i:e], size)
		if !ok {
			return 0, e, jErr(i, "%s is not a %d-bit unsigned integer", b[i:e], size)
		}
		return v, e, nil
	}
	return 0, i, jErr(i, "want an integer, found %s", found(b, i))
}

// shortUint is strconv.ParseUint(s, 10, size) for the strings that cannot
// overflow (19 digits at most, 9 for 32 bits), the timestamps pdata writes:
// false means "ask strconv".
func shortUint(s []byte, size int) (uint64, bool) {
	if len(s) == 0 || len(s) > 19 || size == 32 && len(s) > 9 {
		return 0, false
	}
	var v uint64
	for _, c := range s {
		if !isDigit(c) {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, true
}

// jInt reads a signed integer field of size bits (pdata's ReadInt32,
// ReadInt64): a number, or a string strconv parses.
func (d *Decoder) jInt(b []byte, i int, size int) (int64, int, error) {
	if i < len(b) && b[i] == '"' {
		s, next, err := d.jStr(b, i, strView)
		if err != nil {
			return 0, next, err
		}
		v, perr := strconv.ParseInt(bytesView(s), 10, size)
		if perr != nil {
			return 0, next, jErr(i, "%q is not a %d-bit integer", s, size)
		}
		return v, next, nil
	}
	if i < len(b) && (b[i] == '-' || isDigit(b[i])) {
		e := numEnd(b, i)
		tok := b[i:e]
		neg := tok[0] == '-'
		if neg {
			tok = tok[1:]
		}
		u, ok := numUint(tok, size)
		limit := uint64(1)<<(size-1) - 1
		if neg {
			limit++
		}
		if !ok || u > limit {
			return 0, e, jErr(i, "%s is not a %d-bit integer", b[i:e], size)
		}
		if neg {
			return -int64(u), e, nil
		}
		return int64(u), e, nil
	}
	return 0, i, jErr(i, "want an integer, found %s", found(b, i))
}

// validateFloat is jsoniter's check of a number before strconv parses it.
func validateFloat(s []byte) bool {
	if len(s) == 0 || s[0] == '-' {
		return false
	}
	for k, c := range s {
		if c == '.' {
			return k+1 < len(s) && isDigit(s[k+1])
		}
	}
	return true
}

// numFloat reads a number token as jsoniter's ReadFloat64 does. consumed
// is false when it fails before reading the token (jsoniter's Skip then
// tries big.Float on it).
func numFloat(tok []byte, size int) (f float64, ok, consumed bool) {
	r := tok
	neg := len(tok) > 0 && tok[0] == '-'
	if neg {
		r = tok[1:]
	}
	if len(r) == 0 || r[0] == '.' || r[0] == '0' && len(r) > 1 && isDigit(r[1]) {
		return 0, false, false
	}
	if !validateFloat(r) {
		return 0, false, true
	}
	f, err := strconv.ParseFloat(bytesView(r), size)
	if err != nil {
		return 0, false, true
	}
	if neg {
		f = -f
	}
	return f, true, true
}

// jFloat reads a double (pdata's ReadFloat64): a number, or a string
// strconv parses ("NaN", "Infinity" and the like).
func (d *Decoder) jFloat(b []byte, i int) (float64, int, error) {
	if i < len(b) && b[i] == '"' {
		s, next, err := d.jStr(b, i, strView)
		if err != nil {
			return 0, next, err
		}
		v, perr := strconv.ParseFloat(bytesView(s), 64)
		if perr != nil {
			return 0, next, jErr(i, "%q is not a double", s)
		}
		return v, next, nil
	}
	if i < len(b) && (b[i] == '-' || isDigit(b[i])) {
		e := numEnd(b, i)
		f, ok, _ := numFloat(b[i:e], 64)
		if !ok {
			return 0, e, jErr(i, "%s is not a number", b[i:e])
		}
		return f, e, nil
	}
	return 0, i, jErr(i, "want a number, found %s", found(b, i))
}

// skipNumber reports whether jsoniter's Skip accepts the number token
// tok (an unknown field's): its checks differ from those of the reads.
func skipNumber(tok []byte) error {
	if tok[0] == '0' {
		// Skip reads a number starting with 0 as a float32.
		if _, ok, _ := numFloat(tok, 32); !ok {
			return errBadNumber
		}
		return nil
	}
	rest := tok[1:]
	dot := false
	for k := 0; k < len(rest); k++ {
		switch c := rest[k]; {
		case isDigit(c):
		case c == '.':
			if dot || k+1 >= len(rest) || !isDigit(rest[k+1]) {
				return errBadNumber
			}
			dot = true
		default:
			return skipNumberSlow(tok)
		}
	}
	if len(rest) > 0 {
		return nil
	}
	return skipNumberSlow(tok)
}

var errBadNumber = errors.New("invalid number")

// skipNumberSlow is Skip's fallback: ReadFloat64, and if that fails before
// it reads the token, big.ParseFloat of what follows the sign.
func skipNumberSlow(tok []byte) error {
	_, ok, consumed := numFloat(tok, 64)
	if ok {
		return nil
	}
	if consumed {
		return errBadNumber
	}
	r := tok
	if r[0] == '-' {
		r = r[1:]
	}
	return bigFloatOK(r)
}

// errLongNumber is bigFloatOK's answer for a number it will not decide.
var errLongNumber = errors.New("a number too long to check (pdata would spend seconds on it)")

// bigFloatOK reports whether big.ParseFloat(s, 10, …) accepts s (made of
// number bytes: digits, '+', '-', '.', 'e', 'E') without calling it: its
// parsing is quadratic in the digits (4 s for a megabyte of them). It
// follows big.Float's scan: a sign, digits with at most one point, an
// exponent that fits an int64, and a binary exponent (the mantissa's bit
// length, less the fraction's digits, plus the exponent) within an int32
// unless the mantissa is zero. The bit length is computed exactly only
// when bounds do not decide, for at most 4096 significant digits; beyond
// that it returns errLongNumber (a number no producer writes, and the one
// other place where the decoder differs from pdata).
func bigFloatOK(s []byte) error {
	bad := errBadNumber
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits, frac, sig, dot := 0, 0, 0, false
	lead := -1 // index of the first non-zero digit
	for ; i < len(s); i++ {
		c := s[i]
		if c == '.' && !dot {
			dot = true
			continue
		}
		if !isDigit(c) {
			break
		}
		digits++
		if dot {
			frac++
		}
		if c != '0' && lead < 0 {
			lead = i
		}
		if lead >= 0 {
			sig++
		}
	}
	if digits == 0 {
		return bad
	}
	var exp int64
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		start := i
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		d := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == d {
			return bad
		}
		e := s[start:i]
		if e[0] == '+' {
			e = e[1:]
		}
		var err error
		if exp, err = strconv.ParseInt(bytesView(e), 10, 64); err != nil {
			return bad
		}
	}
	if i != len(s) {
		return bad
	}
	if lead < 0 {
		return nil // zero: no exponent check
	}
	// The binary exponent is bitlen - frac + exp, with bitlen between 1
	// and 4 × sig (a decimal digit is under 4 bits).
	inRange := func(lo, hi int64) (all, none bool) {
		all = lo >= math.MinInt32 && hi <= math.MaxInt32
		none = hi < math.MinInt32 || lo > math.MaxInt32
		return all, none
	}
	if exp > math.MaxInt64/2 || exp < math.MinInt64/2 {
		return bad // far beyond the range (however big computes it)
	}
	base := exp - int64(frac)
	all, none := inRange(base+1, base+4*int64(sig))
	switch {
	case all:
		return nil
	case none:
		return bad
	case sig > 4096:
		return errLongNumber
	}
	m := make([]byte, 0, sig)
	for _, c := range s[lead:] {
		if c == '.' {
			continue
		}
		if !isDigit(c) {
			break
		}
		m = append(m, c)
	}
	n, _ := new(big.Int).SetString(string(m), 10)
	if e := base + int64(n.BitLen()); e < math.MinInt32 || e > math.MaxInt32 {
		return bad
	}
	return nil
}

// jSkip skips the value at b[i] (an unknown field's), checking it as
// jsoniter's Skip does.
func (d *Decoder) jSkip(b []byte, i int) (int, error) {
	if i >= len(b) {
		return i, jErr(i, "%v", errEndOfRequest)
	}
	switch c := b[i]; {
	case c == '"':
		_, next, err := d.jStr(b, i, strCheck)
		return next, err
	case c == 'n':
		i, _, err := lit(b, i, "null")
		return i, err
	case c == 't':
		i, _, err := lit(b, i, "true")
		return i, err
	case c == 'f':
		i, _, err := lit(b, i, "false")
		return i, err
	case c == '-' || isDigit(c):
		e := numEnd(b, i)
		if err := skipNumber(b[i:e]); err != nil {
			msg := fmt.Sprintf("invalid number %.40s", b[i:e])
			if err == errLongNumber {
				msg = err.Error()
			}
			return e, &jsonError{msg: msg, off: i, cause: err}
		}
		return e, nil
	case c == '[':
		i, more, err := d.jOpen(b, i, '[')
		for n := 0; more && err == nil; n++ {
			if i, err = d.jSkip(b, i); err != nil {
				return i, inIndex(err, n)
			}
			i, more, err = d.jNext(b, i)
		}
		return i, err
	case c == '{':
		i, more, err := d.jOpen(b, i, '{')
		for more && err == nil {
			var key []byte
			if key, _, i, err = d.jKey(b, i); err != nil {
				return i, err
			}
			if i, err = d.jSkip(b, i); err != nil {
				return i, inKey(err, key)
			}
			i, more, err = d.jNext(b, i)
		}
		return i, err
	}
	return i, jErr(i, "unexpected %s", quoteByte(b[i]))
}

// jEnum reads an enum: a number (an int32), or one of names exactly.
func (d *Decoder) jEnum(b []byte, i int, names []string) (int32, int, error) {
	if i < len(b) && b[i] == '"' {
		s, next, err := d.jStr(b, i, strView)
		if err != nil {
			return 0, next, err
		}
		for k, n := range names {
			if n == string(s) {
				return int32(k), next, nil
			}
		}
		return 0, next, jErr(i, "unknown value %q", s)
	}
	if i < len(b) && (b[i] == '-' || isDigit(b[i])) {
		v, next, err := d.jInt(b, i, 32)
		return int32(v), next, err
	}
	return 0, i, jErr(i, "want a number or a name, found %s", found(b, i))
}

var (
	spanKindNames   = []string{"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT", "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"}
	statusCodeNames = []string{"STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"}
)

// jBool reads a bool (null is an error, as in jsoniter).
func jBool(b []byte, i int) (bool, int, error) {
	if i < len(b) {
		switch b[i] {
		case 't':
			i, _, err := lit(b, i, "true")
			return true, i, err
		case 'f':
			i, _, err := lit(b, i, "false")
			return false, i, err
		}
	}
	return false, i, jErr(i, "want true or false, found %s", found(b, i))
}

// jID reads a trace or span id (size 16 or 8 bytes) into dst: hex, read
// raw as pdata reads it (ReadStringAsSlice: up to the first quote, escapes
// and all); "" is the zero id. rawKey says the field name had no escapes:
// then base64 of the id's size is accepted too (see decodeBase64ID).
func jID(dst []byte, b []byte, i int, rawKey bool) (int, error) {
	s, e, err := jRaw(b, i, "hex")
	if err != nil {
		return e, err
	}
	clear(dst)
	if len(s) == 0 {
		return e + 1, nil
	}
	if len(s) == 2*len(dst) {
		ok := true
		for k := range dst {
			h, l := hexVal[s[2*k]], hexVal[s[2*k+1]]
			if h|l > 15 {
				ok = false
				break
			}
			dst[k] = h<<4 | l
		}
		if ok {
			return e + 1, nil
		}
		clear(dst)
	} else if rawKey && !hasBackslash(s) {
		if n, ok := decodeBase64ID(dst, s); ok && n == len(dst) {
			return e + 1, nil
		}
	}
	if hasBackslash(s) {
		// pdata ends the id at the escaped quote, if that is what it is;
		// its hex is invalid either way.
		return e, &jsonError{msg: fmt.Sprintf("id %q has a backslash", s), off: i, id: true}
	}
	return e + 1, &jsonError{msg: fmt.Sprintf("%q is not a %d-byte id", s, len(dst)), off: i, id: true}
}

func hasBackslash(s []byte) bool { return bytes.IndexByte(s, '\\') >= 0 }

// jRaw reads a string at b[i] raw, as pdata reads ids and bytes
// (ReadStringAsSlice): up to the first quote, escapes and all. It returns
// the string's bytes and the offset of its closing quote; what names the
// string wanted (hex, base64) in the error when b[i] opens none.
func jRaw(b []byte, i int, what string) ([]byte, int, error) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, jErr(i, "want a %s string, found %s", what, found(b, i))
	}
	e := i + 1
	if n := bytes.IndexByte(b[e:], '"'); n >= 0 {
		e += n
	} else {
		return nil, len(b), jErr(len(b), "the request ends inside a string")
	}
	return b[i+1 : e], e, nil
}

// jBytes checks a bytesValue: standard padded base64, read raw as pdata
// reads it (ReadStringAsSlice), that encoding/base64 decodes (it skips
// newlines).
func (d *Decoder) jBytes(b []byte, i int) (int, error) {
	s, e, err := jRaw(b, i, "base64")
	if err != nil {
		return e, err
	}
	if len(s) == 0 {
		return e + 1, nil
	}
	if n := base64.StdEncoding.DecodedLen(len(s)); cap(d.esc) < n {
		d.esc = make([]byte, n)
	}
	if _, err := base64.StdEncoding.Decode(d.esc[:cap(d.esc)], s); err != nil || hasBackslash(s) {
		return e + 1, jErr(i, "invalid base64")
	}
	return e + 1, nil
}
