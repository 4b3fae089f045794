module github.com/purerbd/purerbd

go 1.26
