//go:build !race

package testwait

const raceFactor = 1
