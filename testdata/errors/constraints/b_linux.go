package constraints

// B is only built on linux, as its file name says.
type B interface {
	//ratelimit:period=1 threshold=1
	Do() error
}
