module github.com/stormradius/stormradius/scripts/chtls

go 1.26
