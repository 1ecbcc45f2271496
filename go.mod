module github.com/omnistage/omnistage

go 1.26.8
