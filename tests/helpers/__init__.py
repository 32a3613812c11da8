"""Helpers the tests share (not tests themselves): fixtures data, harnesses, golden cases."""
