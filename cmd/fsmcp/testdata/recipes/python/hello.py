def greeting(name):
    return "hello, " + name
