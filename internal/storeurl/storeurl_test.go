package storeurl_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/store"
)

// ReadOnly reaches every store a URL names: nothing is created for it, and
// the store it opens over existing data refuses writes.
func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	for name, opts := range map[string]func(t *testing.T) storeurl.Options{
		"data": func(t *testing.T) storeurl.Options { return storeurl.Options{Data: filepath.Join(t.TempDir(), "data")} },
		"sqlite": func(t *testing.T) storeurl.Options {
			return storeurl.Options{URL: "sqlite://" + filepath.Join(t.TempDir(), "data")}
		},
		"clickhouse": func(t *testing.T) storeurl.Options { return storeurl.Options{URL: chtest.FreshDSN(t)} },
	} {
		t.Run(name, func(t *testing.T) {
			o := opts(t)
			ro := o
			ro.ReadOnly = true
			if _, err := storeurl.Open(ctx, ro); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("nothing there: %v, want ErrNotFound", err)
			}
			st, err := storeurl.Open(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
			if st, err = storeurl.Open(ctx, ro); err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.Apply(ctx, store.Batch{Watermark: 1}); !errors.Is(err, store.ErrReadOnly) {
				t.Errorf("Apply: %v, want ErrReadOnly", err)
			}
		})
	}
}
