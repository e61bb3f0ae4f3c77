package chsource

// ScanRows makes s read through clickhouse-go's rows (the native
// protocol's path) over HTTP too.
func ScanRows(s *Source) { s.rowsOnly = true }
