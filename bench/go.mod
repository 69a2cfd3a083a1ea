module github.com/apollo-11/apollo/bench

go 1.26.8

require github.com/apollo-11/apollo v0.0.0

replace github.com/apollo-11/apollo => ../
