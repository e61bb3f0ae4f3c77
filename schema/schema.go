// Package schema holds the versioned, idempotent migrations of every store,
// embedded in the binary and applied at start.
package schema

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

//go:embed sqlite clickhouse
var files embed.FS

// Migration is one step of a schema: applied once, in Version order; its
// statements are idempotent (IF NOT EXISTS), so applying it again is safe.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Statements splits the migration into statements at semicolons that end a
// line, dropping comment-only lines.
func (m Migration) Statements() []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(m.SQL, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(t, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// Load returns the migrations under dir (e.g. "sqlite/spans"), ordered by
// version. Files are named NNNN_name.sql.
func Load(dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(files, dir)
	if err != nil {
		return nil, fmt.Errorf("schema: %s: %w", dir, err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, rest, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("schema: %s: want NNNN_name.sql", path.Join(dir, name))
		}
		b, err := files.ReadFile(path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("schema: %w", err)
		}
		out = append(out, Migration{Version: v, Name: rest, SQL: string(b)})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("schema: %s: two migrations numbered %d", dir, out[i].Version)
		}
	}
	return out, nil
}
