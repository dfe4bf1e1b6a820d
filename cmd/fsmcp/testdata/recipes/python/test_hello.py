import unittest

from hello import greeting


class GreetingTest(unittest.TestCase):
    def test_greeting(self):
        self.assertEqual(greeting("python"), "hello, python")


if __name__ == "__main__":
    unittest.main()
