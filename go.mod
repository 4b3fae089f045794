module github.com/purerbd/purerbd

go 1.26.0

require (
	github.com/pmorjan/kmod v1.1.1 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
