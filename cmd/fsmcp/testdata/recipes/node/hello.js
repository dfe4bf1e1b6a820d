exports.greeting = (name) => `hello, ${name}`;
