const test = require('node:test');
const assert = require('node:assert');
const { greeting } = require('../hello.js');

test('greeting', () => {
  assert.strictEqual(greeting('node'), 'hello, node');
});
