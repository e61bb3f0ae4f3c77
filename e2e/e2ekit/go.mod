module github.com/stormradius/stormradius/e2e/e2ekit

go 1.26.8
