package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/sqlite"
	"github.com/stormradius/stormradius/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, fresh bool) store.Store {
		// One directory per subtest: t.TempDir's parent is the subtest's.
		dir := filepath.Join(filepath.Dir(t.TempDir()), "data")
		if fresh {
			os.RemoveAll(dir)
		}
		s, err := sqlite.Open(context.Background(), sqlite.Options{Dir: dir, Window: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
