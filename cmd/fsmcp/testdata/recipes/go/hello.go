// Command hello greets.
package main

import "fmt"

// greeting is what hello prints.
func greeting(name string) string { return "hello, " + name }

func main() { fmt.Println(greeting("world")) }
