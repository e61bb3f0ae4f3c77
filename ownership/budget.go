package ownership

import (
	"math"
	"sync/atomic"
)

// budget is a retry token bucket, as gRPC's retry throttling: tokens are
// counted in thousandths, in one atomic integer.
type budget struct {
	unlimited bool
	max       int64 // milli-tokens
	ratio     int64 // milli-tokens given back per success
	tokens    atomic.Int64
}

func newBudget(maxTokens, tokenRatio float64) *budget {
	b := &budget{}
	if maxTokens <= 0 {
		b.unlimited = true
		return b
	}
	b.max = milli(maxTokens)
	b.ratio = milli(tokenRatio)
	b.tokens.Store(b.max)
	return b
}

func milli(f float64) int64 {
	if f >= math.MaxInt64/2000 {
		return math.MaxInt64 / 2
	}
	return int64(math.Round(f * 1000))
}

// success gives back a token ratio. When the bucket is full (the steady
// state) it only reads.
func (b *budget) success() {
	if b.unlimited {
		return
	}
	for {
		cur := b.tokens.Load()
		if cur >= b.max {
			return
		}
		if b.tokens.CompareAndSwap(cur, min(cur+b.ratio, b.max)) {
			return
		}
	}
}

// failure takes a token.
func (b *budget) failure() {
	if b.unlimited {
		return
	}
	for {
		cur := b.tokens.Load()
		if cur <= 0 {
			return
		}
		if b.tokens.CompareAndSwap(cur, max(cur-1000, 0)) {
			return
		}
	}
}

// allow reports whether a retry may be made now.
func (b *budget) allow() bool {
	return b.unlimited || b.tokens.Load() > b.max/2
}
